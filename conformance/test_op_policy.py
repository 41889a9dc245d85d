"""The op_policy category's tests: conformance/categories/op_policy.py."""

from __future__ import annotations

from conformance.categories import op_policy
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(op_policy.policy_cases)
def test_op_policy(target: Target, case: Case) -> None:
    expect(target, op_policy.output_dtypes(target, case))


@conformance_cases(op_policy.agreement_cases)
def test_torch_and_tensor_agree(target: Target, case: Case) -> None:
    expect(target, op_policy.entry_agreement(target, case))

"""op_policy: every entry point of every listed op gives the spec's dtype (categories/op_policy.py)."""

from __future__ import annotations

import pytest

from conformance.categories import op_policy
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("op_policy")
def test_op_policy(target: Target, case: Case) -> None:
    expect(target, op_policy.output_dtypes(target, case))


@pytest.mark.conformance_cases("entry_agreement")
def test_torch_and_tensor_agree(target: Target, case: Case) -> None:
    expect(target, op_policy.entry_agreement(target, case))

"""The custom_op category's tests: conformance/categories/custom_op.py."""

from __future__ import annotations

from conformance.categories import custom_op
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(custom_op.cases)
def test_custom_op(target: Target, case: Case) -> None:
    expect(target, custom_op.combination(target, case))

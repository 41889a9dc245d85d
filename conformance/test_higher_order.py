"""The higher_order category's tests: conformance/categories/higher_order.py."""

from __future__ import annotations

from conformance.categories import higher_order
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(higher_order.cases)
def test_higher_order_kernel(target: Target, case: Case[higher_order.Kernel]) -> None:
    expect(target, higher_order.kernel(target, case))

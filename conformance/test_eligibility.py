"""The eligibility category's tests: conformance/categories/eligibility.py."""

from __future__ import annotations

from conformance.categories import eligibility
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(eligibility.cases)
def test_eligibility(target: Target, case: Case) -> None:
    expect(target, eligibility.untouched(target, case))

"""The promote category's tests: conformance/categories/promote.py."""

from __future__ import annotations

from conformance.categories import promote
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(promote.output_cases)
def test_promote(target: Target, case: Case) -> None:
    expect(target, promote.output_dtypes(target, case))


@conformance_cases(promote.widest_cases)
def test_promote_widest_argument(target: Target, case: Case) -> None:
    expect(target, promote.arrival(target, case))


@conformance_cases(promote.foreign_cases)
def test_promote_foreign_float(target: Target, case: Case) -> None:
    expect(target, promote.arrival(target, case))

"""The unlisted category's tests: conformance/categories/unlisted.py."""

from __future__ import annotations

from conformance.categories import unlisted
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(unlisted.cases)
def test_unlisted(target: Target, case: Case) -> None:
    expect(target, unlisted.untouched(target, case))

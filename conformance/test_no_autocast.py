"""The no_autocast category's tests: conformance/categories/no_autocast.py."""

from __future__ import annotations

from conformance.categories import no_autocast
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(no_autocast.cases)
def test_no_autocast(target: Target, case: Case[no_autocast.Asked]) -> None:
    expect(target, no_autocast.no_autocast(target, case))

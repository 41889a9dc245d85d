"""The banned category's tests: conformance/categories/banned.py."""

from __future__ import annotations

from conformance.categories import banned
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(banned.cases)
def test_banned_raises(target: Target, case: Case) -> None:
    expect(target, banned.raises(target, case))

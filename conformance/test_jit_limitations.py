"""The jit category's tests: conformance/categories/jit.py (the scenarios: conformance/kit/scenarios/)."""

from __future__ import annotations

from conformance.categories import jit
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(jit.cases)
def test_limitation(target: Target, case: Case[jit.Limitation]) -> None:
    expect(target, jit.limitation(target, case))

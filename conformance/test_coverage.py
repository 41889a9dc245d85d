"""The coverage category's tests: conformance/categories/coverage.py."""

from __future__ import annotations

import pytest

from conformance import registry
from conformance.categories import coverage, eligibility
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.coverage
def test_spec_entry_has_tests(target: Target, listed_op: str) -> None:
    needs = registry.expected_categories(target.device_spec.ops[listed_op].policy, target.spec.rules)
    expect(target, coverage.op_has_tests(target, listed_op, registry.coverage(target)[listed_op], needs))


@conformance_cases(coverage.cases)
def test_eligibility_rule_has_tests(target: Target, case: Case[coverage.Demanded]) -> None:
    """Each kind rules.eligibility / rules.out_of_place_only demands is checked for some op."""
    made = registry.cases(target, eligibility.cases)
    expect(target, coverage.rule_has_tests(target, case, eligibility.kinds_without_cases(target, made)))

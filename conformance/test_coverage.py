"""Every op the device spec lists yields tests in each category its policy calls for, and
every eligibility kind the rules demand yields tests."""

from __future__ import annotations

import pytest

from conformance import registry
from conformance.cases import EligibilityKind, eligibility_kinds, eligibility_kinds_without_cases
from conformance.plugin import target_of
from conformance.registry import coverage, expected_categories
from conformance.target import Target


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "eligibility_kind" in metafunc.fixturenames:
        target = target_of(metafunc.config)
        kinds = eligibility_kinds(target.spec.rules)
        metafunc.parametrize(
            "eligibility_kind", [pytest.param(k, id=f"{target.device}-{k.name}") for k in kinds]
        )


@pytest.mark.coverage
def test_spec_entry_has_tests(target: Target, listed_op: str) -> None:
    missing = coverage(target)[listed_op]
    if missing:
        entry = target.device_spec.ops[listed_op]
        info = target.spec.op_info(listed_op)
        why = "spec/ops/ has no samples for it" if info is None or not info.samples else "see the generators"
        pytest.fail(
            f"{listed_op} ({entry.policy}, {entry.loc}) yields no {', '.join(missing)} tests "
            f"(needs {', '.join(expected_categories(entry.policy, target.spec.rules))}): {why}",
            pytrace=False,
        )


@pytest.mark.coverage
def test_eligibility_rule_has_tests(target: Target, eligibility_kind: EligibilityKind) -> None:
    """Each kind rules.eligibility / rules.out_of_place_only demands is checked for some op."""
    missing = eligibility_kinds_without_cases(target, registry.cases(target, "eligibility"))
    if eligibility_kind in missing:
        pytest.fail(
            f"{target.spec.rules.loc}: {eligibility_kind.rule} demands {eligibility_kind.name!r} "
            f"eligibility tests, but no op {target.device} lists yields one "
            "(conformance/cases.py eligibility)\n"
            f"  list the eligibility tests: pytest conformance --backend {target.device} -m eligibility "
            "--collect-only -q",
            pytrace=False,
        )

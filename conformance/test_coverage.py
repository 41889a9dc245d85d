"""coverage: every op the device spec lists yields tests in each category its policy calls for,
and every eligibility kind the rules demand yields tests (conformance/registry.py)."""

from __future__ import annotations

import pytest

from conformance import registry
from conformance.categories.eligibility import EligibilityKind, eligibility_kinds, kinds_without_cases
from conformance.kit.case import Case
from conformance.kit.verdict import Observation, expect
from conformance.session import target_of
from conformance.target import Target


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "eligibility_kind" in metafunc.fixturenames:
        target = target_of(metafunc.config)
        kinds = eligibility_kinds(target.spec.rules)
        # --op narrows the ops: whether some op yields each kind is a question for a full run
        narrowed = pytest.mark.skip(reason="--op narrows the run: judged on a full run")
        marks = [narrowed] if target.selected_ops else []
        metafunc.parametrize(
            "eligibility_kind", [pytest.param(k, id=f"{target.device}-{k.name}", marks=marks) for k in kinds]
        )


@pytest.mark.coverage
def test_spec_entry_has_tests(target: Target, listed_op: str) -> None:
    entry = target.device_spec.ops[listed_op]
    info = target.spec.op_info(listed_op)
    why = (
        "spec/ops/ has no samples for it" if info is None or not info.samples else "see its category modules"
    )
    expect(
        target,
        Observation(
            Case("coverage", target.device, op=listed_op, entry=listed_op),
            registry.OP_HAS_TESTS,
            f"{listed_op} ({entry.policy}, {entry.loc}) yields no tests in these categories: {why}",
            [],
            registry.coverage(target)[listed_op],
            facts={"needs": ", ".join(registry.expected_categories(entry.policy, target.spec.rules))},
        ),
    )


@pytest.mark.coverage
def test_eligibility_rule_has_tests(target: Target, eligibility_kind: EligibilityKind) -> None:
    """Each kind rules.eligibility / rules.out_of_place_only demands is checked for some op."""
    missing = kinds_without_cases(target, registry.cases(target, "eligibility"))
    expect(
        target,
        Observation(
            Case("coverage", target.device),
            registry.RULE_HAS_TESTS,
            f"{target.spec.rules.loc}: {eligibility_kind.rule} demands {eligibility_kind.name!r} eligibility "
            f"tests, but no op {target.device} lists yields one (conformance/categories/eligibility.py)",
            False,
            eligibility_kind in missing,
            reproduce=f"pytest conformance --backend {target.device} -m eligibility --collect-only -q",
        ),
    )

"""coverage: every spec entry yields tests.

Cases: every op the device spec lists (``test_spec_entry_has_tests``, parametrized by
``listed_op``), and every kind of input or call ``rules.eligibility`` and
``rules.out_of_place_only`` exempt (:func:`cases`).

Procedure: the suite's own case generators, asked for the run's target
(:func:`conformance.registry.coverage` answers across the categories).
Expectation: a listed op yields tests in every category its policy calls for (each category
declares the policies it owes); each exempt kind is checked for some op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..kit.case import Case
from ..kit.category import Category
from ..kit.verdict import Observation, not_applicable
from ..target import Target
from .eligibility import EligibilityKind, eligibility_kinds

OP_HAS_TESTS = "coverage.op_has_tests"
RULE_HAS_TESTS = "coverage.rule_has_tests"


@dataclass(frozen=True)
class Demanded:
    """An eligibility kind the rules demand tests for."""

    kind: EligibilityKind
    ID: ClassVar[str] = "{kind.name}"


def cases(target: Target) -> list[Case[Demanded]]:
    return [Case("coverage", target.device, params=Demanded(k)) for k in eligibility_kinds(target.spec.rules)]


CATEGORY = Category(
    "coverage",
    __doc__,
    checks=(OP_HAS_TESTS, RULE_HAS_TESTS),
    generators=(cases,),
    mandatory_able=False,
)


def op_has_tests(target: Target, op: str, missing: list[str], needs: tuple[str, ...]) -> Observation:
    """The listed ``op`` yields tests in every category ``needs`` (``missing``: those it does not)."""
    entry = target.device_spec.ops[op]
    info = target.spec.op_info(op)
    why = (
        "spec/ops/ has no samples for it" if info is None or not info.samples else "see its category modules"
    )
    return Observation(
        Case("coverage", target.device, op=op, entry=op),
        OP_HAS_TESTS,
        f"{op} ({entry.policy}, {entry.loc}) yields no tests in these categories: {why}",
        [],
        missing,
        facts={"needs": ", ".join(needs)},
    )


def rule_has_tests(target: Target, case: Case[Demanded], missing: list[EligibilityKind]) -> Observation:
    """The case's kind is checked for some op (``missing``: the kinds no eligibility case checks)."""
    if target.selected_ops:
        not_applicable("--op narrows the run: judged on a full run")
    assert case.params is not None
    kind = case.params.kind
    return Observation(
        case,
        RULE_HAS_TESTS,
        f"{target.spec.rules.loc}: {kind.rule} demands {kind.name!r} eligibility "
        f"tests, but no op {target.device} lists yields one (conformance/categories/eligibility.py)",
        False,
        kind in missing,
        reproduce=f"pytest conformance --backend {target.device} -m eligibility --collect-only -q",
    )

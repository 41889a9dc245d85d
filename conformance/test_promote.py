"""Promote: mixed lower/float32 inputs give float32, all-lower stays lower, other mixes as the spec says."""

from __future__ import annotations

import pytest

from conformance.assertions import assert_same_dtypes, fail
from conformance.cases import Case
from conformance.checks import policy_call
from conformance.deep_checks import promote_arrival
from conformance.known_bugs import judge
from conformance.target import Target


@pytest.mark.conformance_cases("promote")
def test_promote(target: Target, case: Case) -> None:
    r = policy_call(target, case, case.op)
    assert_same_dtypes(case, r.native, r.expected, r.inputs, case.op, r.plan, both_raise_ok=True)


@pytest.mark.conformance_cases("promote_widest")
def test_promote_widest_argument(target: Target, case: Case) -> None:
    """Each tensor argument in turn, optional ones included, holds the widest dtype: every
    eligible input arrives below Autocast cast to it (output dtypes cannot show this for
    ops that promote by themselves)."""
    r = promote_arrival(target, case)
    optional = case.inputs.endswith("_optional")
    check = "promote.widest_in_optional_tensor" if optional else "promote.widest_in_tensor"
    judge(
        target,
        check,
        r.expected,
        r.observed,
        lambda why: fail(
            case,
            "promote did not cast the inputs to the widest type (rules: promote policy)",
            r.inputs,
            arrived_below_autocast=why,
            plan=r.plan,
        ),
    )


@pytest.mark.conformance_cases("promote_foreign")
def test_promote_foreign_float(target: Target, case: Case) -> None:
    """float16 with bfloat16: what rules.promote.foreign_float says (an error or promotion)."""
    r = promote_arrival(target, case)
    judge(
        target,
        "promote.foreign_float",
        r.expected,
        r.observed,
        lambda why: fail(
            case,
            "promote with both lower dtypes differs from rules.promote.foreign_float",
            r.inputs,
            arrived_below_autocast=why,
            plan=r.plan,
        ),
    )

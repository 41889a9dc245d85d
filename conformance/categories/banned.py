"""banned: banned ops raise under autocast, with the spec's message.

Cases, per dtype under test: every op of the banned policy with samples, on float32 inputs.
Procedure: the call under native autocast.
Expectation: it raises, and the error contains the first line of the spec's ``message``.
"""

from __future__ import annotations

from autocast_spec.model import Policy

from ..kit.calls import policy_call
from ..kit.case import Case, listed_ops
from ..kit.category import Category, owes
from ..kit.verdict import Observation, one_line
from ..target import Target

RAISES = "banned.raises"


def cases(target: Target) -> list[Case[None]]:
    return [lo.case(target, "banned") for lo in listed_ops(target, (Policy.BANNED,), banned=True)]


CATEGORY = Category(
    "banned",
    __doc__,
    checks=(RAISES,),
    generators=(cases,),
    owed=owes(Policy.BANNED),
)


def raises(target: Target, case: Case) -> Observation:
    r = policy_call(target, case, case.op)
    message = target.device_spec.ops[case.op].message or ""
    first_line = message.strip().splitlines()[0] if message.strip() else ""
    expected = f"raises: {first_line}"
    if r.native.error is None:
        observed = f"runs: {', '.join(r.native.dtypes)}"
    elif first_line in str(r.native.error):
        observed = expected
    else:
        observed = f"raises another message: {one_line(r.native.error)}"
    return Observation(
        case, RAISES, "a banned op must raise the spec's message", expected, observed, r.inputs
    )

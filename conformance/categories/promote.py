"""promote: mixed floating inputs go to the widest type (``rules.promote``).

Cases, per dtype under test, for every op of the promote policy with samples:

* its output dtypes with each input mix of :data:`MIXES` (the mixes of two dtypes only for
  samples of two or more test-float tensors): ``test_promote``;
* each test-float tensor argument in turn holding float32 (the widest eligible type) while
  the others hold the lower dtype, optional tensors included: what arrives below Autocast
  (``test_promote_widest_argument``; output dtypes cannot show this for ops that promote by
  themselves);
* float16 and bfloat16 together (``rules.promote.foreign_float``: an error or promotion):
  ``test_promote_foreign_float``.

Procedure and expectation: output dtypes against the oracle (as op_policy); for arrivals,
the distinct floating dtypes arriving below Autocast against those the plan names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from autocast_spec.catalog import ListArg, Sample, TensorArg
from autocast_spec.model import Policy
from reference_impl.engine.signatures import SlotKind, signature
from reference_impl.harness.samples import call

from ..kit.calls import decide, policy_call
from ..kit.case import Case, Mix, MixRole, count_test_floats, listed_ops, shown
from ..kit.category import Category, owes
from ..kit.inputs import case_inputs
from ..kit.intercept import arrived, intercepted
from ..kit.outputs import dtype_observation
from ..kit.verdict import Observation, one_line
from ..target import Target

OUTPUT_DTYPE = "promote.output_dtype"
WIDEST = "promote.widest_in_tensor"
WIDEST_OPTIONAL = "promote.widest_in_optional_tensor"
FOREIGN_FLOAT = "promote.foreign_float"
LOWER, FLOAT32 = MixRole.LOWER, torch.float32
MIXES: dict[str, Mix] = {
    "lower+float32": (LOWER, FLOAT32),
    "float32+lower": (FLOAT32, LOWER),
    "all_lower": (LOWER,),
    "all_float32": (FLOAT32,),
    "lower+float64": (LOWER, torch.float64),
}
FLOATING = ("float16", "bfloat16", "float32", "float64")


@dataclass(frozen=True)
class Inputs:
    """A named input mix (:data:`MIXES`)."""

    name: str


@dataclass(frozen=True)
class Widest:
    """The ``index``-th test-float tensor holds the widest dtype; ``optional``: its slot is optional."""

    index: int
    optional: bool = shown("_optional")
    ID: ClassVar[str] = "widest_in_{index}{optional}"


@dataclass(frozen=True)
class ForeignFloat:
    """float16 and bfloat16 together."""

    ID: ClassVar[str] = "foreign_float"


def _promote_ops(target: Target, many: bool = False) -> list[Any]:
    return [
        lo
        for lo in listed_ops(target, (Policy.PROMOTE,))
        if not many or count_test_floats(lo.info.samples[0]) >= 2
    ]


def output_cases(target: Target) -> list[Case[Inputs]]:
    out: list[Case[Inputs]] = []
    for lo in _promote_ops(target):
        many = count_test_floats(lo.info.samples[0]) > 1
        out += [
            lo.case(target, "promote", params=Inputs(name), mix=mix)
            for name, mix in MIXES.items()
            if len(mix) == 1 or many
        ]
    return out


def test_float_slots(op: str, sample: Sample) -> list[SlotKind]:
    """For each test-float tensor of ``sample`` (in mix order), the kind of its schema slot."""
    sig = signature(op)
    by_name = {s.name: s for s in sig.slots}
    out: list[SlotKind] = []

    def walk(a: Any, kind: SlotKind) -> None:
        if isinstance(a, TensorArg) and a.is_test_float:
            out.append(kind)
        elif isinstance(a, ListArg):
            for x in a.items:
                walk(x, kind)

    for i, a in enumerate(sample.args):
        walk(a, sig.slots[i].kind if i < len(sig.slots) else SlotKind.OTHER)
    for k, a in sample.kwargs.items():
        walk(a, by_name[k].kind if k in by_name else SlotKind.OTHER)
    return out


def widest_cases(target: Target) -> list[Case[Widest]]:
    out: list[Case[Widest]] = []
    for lo in _promote_ops(target, many=True):
        kinds = test_float_slots(lo.op, lo.info.samples[0])
        for i, kind in enumerate(kinds):
            mix = tuple(FLOAT32 if j == i else LOWER for j in range(len(kinds)))
            out.append(
                lo.case(target, "promote", params=Widest(i, kind is SlotKind.OPTIONAL_TENSOR), mix=mix)
            )
    return out


def foreign_cases(target: Target) -> list[Case[ForeignFloat]]:
    return [
        lo.case(target, "promote", params=ForeignFloat(), mix=(LOWER, MixRole.FOREIGN))
        for lo in _promote_ops(target, many=True)
    ]


CATEGORY = Category(
    "promote",
    __doc__,
    checks=(OUTPUT_DTYPE, WIDEST, WIDEST_OPTIONAL, FOREIGN_FLOAT),
    generators=(output_cases, widest_cases, foreign_cases),
    owed=owes(Policy.PROMOTE),
    runs_kernel=True,
)


def output_dtypes(target: Target, case: Case[Inputs]) -> Observation:
    """Output dtypes against the oracle; native and reference raising alike conforms."""
    return dtype_observation(
        case, policy_call(target, case, case.op), OUTPUT_DTYPE, case.op, both_raise_ok=True
    )


def _arrival_label(dtypes: list[str], lower: str) -> str:
    """The distinct floating dtypes arriving below Autocast, the autocast dtype as ``lower``."""
    names = sorted({"lower" if d == lower else d for d in dtypes if d in FLOATING})
    return ",".join(names) or "no floating tensor"


def arrival(target: Target, case: Case[Widest | ForeignFloat]) -> Observation:
    """What the promote rule says the op's tensors arrive as below Autocast, and what arrives."""
    lower = case.lower
    message = target.spec.rules.promote.foreign_float_message
    with target.tensors():
        m = case_inputs(target.spec.ops[case.op].samples[0], case.mix, lower, target.device)
        d = decide(target, lower, case.op, m)
        assert d.plan is not None, d.text
        if d.plan.raises is not None:
            expected, target_op = f"error: {d.plan.raises}", case.op
        else:
            target_op, want = d.arrival(m)
            expected = _arrival_label(want, case.dtype_text)
        calls, err = intercepted(target, lower, case.op, lambda: call(case.op, m))
    got = arrived(calls, target_op)
    if got is not None:
        observed = _arrival_label(got, case.dtype_text)
    elif err is not None:
        observed = f"error: {message}" if message in str(err) else f"error: {one_line(err)}"
    else:
        observed = f"never reached {target_op}"
    if isinstance(case.params, ForeignFloat):
        check, what = FOREIGN_FLOAT, "promote with both lower dtypes differs from rules.promote.foreign_float"
    else:
        optional = isinstance(case.params, Widest) and case.params.optional
        check = WIDEST_OPTIONAL if optional else WIDEST
        what = "promote did not cast the inputs to the widest type (rules: promote policy)"
    return Observation(case, check, what, expected, observed, m, facts={"plan": d.plan.reason})

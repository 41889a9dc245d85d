"""eligibility: inputs and calls the rules exempt are never cast.

Cases, per dtype under test and listed op with samples, one per kind the rules demand
(:func:`eligibility_kinds`): each dtype of ``rules.eligibility.never_cast`` (float64), the
non-floating dtypes under ``floating_only`` (int64, bool), tensors of another device type
under ``same_device_only``, and the op's in-place and ``out=`` variants under
``rules.out_of_place_only`` (where the variant takes the op's arguments).

Procedure: the call under native autocast, intercepted right below the Autocast key (no
kernel runs); for dtype kinds also the call's output dtypes with and without autocast.
Tensors of another device run for real, with and without autocast.

Expectation: what arrives below Autocast has the dtypes the call was given, and the
output dtypes are those without autocast (no dtype argument set or appended).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from autocast_spec.catalog import Sample
from autocast_spec.model import Policy, Rules
from reference_impl.engine.dtypes import NON_FLOATING, dtype_of
from reference_impl.engine.torch_registry import inplace_variant, op_overload, out_variant
from reference_impl.harness.calls import Intercepted, autograd_key_for, intercept
from reference_impl.harness.samples import Materialized, call
from reference_impl.harness.state import quiet

from ..kit.calls import capture, decide, run_native
from ..kit.case import DISCRIMINATING_MIX, Case, listed_ops
from ..kit.category import Category, owes
from ..kit.dispatcher import same_arguments, takes_arguments_of
from ..kit.inputs import case_inputs
from ..kit.intercept import arrived, intercepted, tensor_dtypes
from ..kit.refusal import intercept_only
from ..kit.verdict import Observation, one_line
from ..target import Target

UNTOUCHED = "eligibility.untouched"

# The kinds about where or how the op is called (not its input dtypes).
OTHER_DEVICE, INPLACE, OUT = "other_device", "inplace", "out"
CALL_KINDS = (OTHER_DEVICE, INPLACE, OUT)


@dataclass(frozen=True)
class EligibilityKind:
    """Inputs or a call a rule says autocast leaves alone (a case's variant)."""

    name: str
    rule: str  # the rules.yaml field that demands it
    dtype: torch.dtype | None = None  # a dtype kind: every test-float tensor gets it; None: a call kind
    ID: ClassVar[str] = "{name}"

    @property
    def why(self) -> str:
        """The rule, as a failure states it."""
        if self.name in NON_FLOATING:
            return f"{self.name} tensors are not floating point (rules.eligibility.floating_only)"
        if self.name in (INPLACE, OUT):
            variant = "in-place variants" if self.name == INPLACE else "out= variants"
            return f"{variant} are not autocast (rules.out_of_place_only)"
        return f"{self.name} is never cast (rules.eligibility.never_cast)"


def eligibility_kinds(rules: Rules) -> tuple[EligibilityKind, ...]:
    """What rules.eligibility and rules.out_of_place_only exempt."""
    el = rules.eligibility
    kinds = [EligibilityKind(d, "eligibility.never_cast", dtype_of(d)) for d in el.never_cast]
    if el.floating_only:
        kinds += [EligibilityKind(d, "eligibility.floating_only", dtype_of(d)) for d in NON_FLOATING]
    if el.same_device_only:
        kinds.append(EligibilityKind(OTHER_DEVICE, "eligibility.same_device_only"))
    if rules.out_of_place_only:
        kinds += [EligibilityKind(k, "out_of_place_only") for k in (INPLACE, OUT)]
    return tuple(kinds)


def other_device(device: str) -> str:
    """A device type whose tensors the backend's autocast must not touch."""
    return "cpu" if device != "cpu" else "meta"


def _entry(op: str, pol: Policy, kind: EligibilityKind) -> str | None:
    """What a case of ``kind`` calls for ``op``; None where the kind has nothing to call."""
    if kind.dtype is not None:
        return None if pol is Policy.BANNED else op  # a banned op raises whatever its inputs
    if kind.name == INPLACE:
        ip = inplace_variant(op)
        return ip if ip is not None and same_arguments(op, ip) else None
    if kind.name == OUT:
        ov = out_variant(op)
        return ov if ov is not None and takes_arguments_of(op, ov) else None
    return op


def cases(target: Target) -> list[Case[EligibilityKind]]:
    kinds = eligibility_kinds(target.spec.rules)
    out: list[Case[EligibilityKind]] = []
    for lo in listed_ops(target, banned=True):
        for kind in kinds:
            entry = _entry(lo.op, lo.policy, kind)
            if entry is not None:
                mix = (kind.dtype,) if kind.dtype is not None else DISCRIMINATING_MIX[lo.policy]
                out.append(lo.case(target, "eligibility", entry=entry, params=kind, mix=mix))
    return out


CATEGORY = Category(
    "eligibility",
    __doc__,
    checks=(UNTOUCHED,),
    generators=(cases,),
    owed=owes(*Policy),
)


def kinds_without_cases(target: Target, made: list[Case[EligibilityKind]]) -> list[EligibilityKind]:
    """The kinds the rules demand that none of ``made`` (the eligibility cases) checks. A backend
    without autocast (``no_autocast``) casts nothing, so none is demanded."""
    if target.device_spec.no_autocast is not None:
        return []
    names = {c.params.name for c in made if c.params is not None}
    return [k for k in eligibility_kinds(target.spec.rules) if k.name not in names]


def out_arguments(out_op: str, like: torch.Tensor) -> dict[str, torch.Tensor]:
    """The written-to keyword arguments of an ``out=`` overload (``out``, or ``Q``/``R``...)."""
    return {
        a.name: torch.empty_like(like)
        for a in op_overload(out_op)._schema.arguments
        if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
    }


def untouched(target: Target, case: Case[EligibilityKind]) -> Observation:
    """Call the op (or its in-place / out= variant) and see what reaches the kernel below Autocast."""
    kind, lower = case.params, case.dtype
    assert kind is not None and lower is not None
    sample = target.spec.ops[case.op].samples[0]
    if kind.name == OTHER_DEVICE:
        return _other_device(target, case, lower, sample)
    with target.tensors():
        m0 = case_inputs(sample, case.mix, lower, target.device)
        kwargs = dict(m0.kwargs)
        if kind.name == OUT:
            kwargs.update(out_arguments(case.entry, m0.tensors()[0]))
        m = Materialized(m0.args, kwargs)
        fn = op_overload(case.entry)
        calls, err = intercepted(target, lower, case.entry, lambda: fn(*m.args, **m.kwargs))
        outputs = None
        if kind.dtype is not None:
            on = run_native(target, lower, lambda: fn(*m.args, **m.kwargs))
            with quiet():
                off = capture(lambda: fn(*m.args, **m.kwargs))
            if on.error is None and off.error is None:
                outputs = (on.dtypes, off.dtypes)
    # fp32_append_dtype redispatches to another overload even for ineligible inputs
    # (appending their own dtype): follow the call the reference plan names.
    arrives_as = decide(target, lower, case.entry, m).target_op if kind.dtype is not None else case.entry
    return leaves_alone(
        case,
        m,
        tensor_dtypes([*m.args, *m.kwargs.values()]),
        arrived(calls, arrives_as),
        arrives_as,
        err,
        kind.why,
        outputs,
    )


def _other_device(target: Target, case: Case, lower: torch.dtype, sample: Sample) -> Observation:
    """Tensors of another device type run as without autocast (their output dtypes match).
    An op whose kernel cannot run its samples (``intercept_only``: the Dimname overloads) is
    watched right below that device's Autocast key instead: its tensors arrive as given."""
    dev = other_device(target.device)
    m = case_inputs(sample, case.mix, lower, dev)
    why = f"tensors on {dev} are not on the autocast device (rules.eligibility.same_device_only)"
    if intercept_only(target, case.op):
        key = autograd_key_for(f"Autocast{'Meta' if dev == 'meta' else dev.upper()}")
        with quiet(), target.autocast(lower), intercept(case.op, key) as calls:
            err: BaseException | None = None
            try:
                call(case.op, m)
            except Intercepted:
                pass
            except Exception as e:
                err = e
        given = tensor_dtypes([*m.args, *m.kwargs.values()])
        return leaves_alone(case, m, given, arrived(calls, case.op), case.op, err, why)
    plain = capture(lambda: call(case.op, m))
    with quiet(), target.autocast(lower):
        native = capture(lambda: call(case.op, m))
    err = native.error if native.error is not None and plain.error is None else None
    got = None if err is not None else list(native.dtypes)
    return leaves_alone(case, m, list(plain.dtypes), got, case.op, err, why)


def leaves_alone(
    case: Case,
    m: Materialized | None,
    given: list[str],
    got: list[str] | None,
    entry: str,
    error: BaseException | None,
    why: str,
    outputs: tuple[tuple[str, ...], tuple[str, ...]] | None = None,
    check: str = UNTOUCHED,
) -> Observation:
    """What arrived below Autocast against what was given (and, where both ran, the output
    dtypes under autocast against those without): the observation of a call autocast
    must leave alone (shared with the unlisted category)."""
    facts = {"rule": why}
    if got is None:
        return Observation(
            case,
            check,
            f"the call never reached {entry} below Autocast",
            ", ".join(given),
            f"error: {one_line(error)}" if error is not None else "no call",
            m,
            entry,
            facts,
        )
    if list(given) != list(got):
        return Observation(
            case,
            check,
            "autocast cast inputs it must leave alone",
            ", ".join(given),
            ", ".join(got),
            m,
            entry,
            facts,
        )
    if outputs is not None and list(outputs[0]) != list(outputs[1]):
        return Observation(
            case,
            check,
            "autocast changed the output dtype of a call it must leave alone (a dtype argument set?)",
            ", ".join(outputs[1]),
            ", ".join(outputs[0]),
            m,
            entry,
            facts,
        )
    return Observation(case, check, "left alone", ", ".join(given), ", ".join(got), m, entry, facts)

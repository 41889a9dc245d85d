"""The procedures behind each generated test: build inputs, run native and reference, compare.

Tests call one function here and one assertion from :mod:`conformance.assertions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.catalog import EntryPoint, Sample
from autocast_spec.common import Tolerance
from reference_impl.dtypes import dtype_name, dtype_of
from reference_impl.oracle import oracle_call
from reference_impl.policy import AutocastState, expected_output_dtype
from reference_impl.runtime import quiet, synthesize_call
from reference_impl.samples import Materialized, entry_point_sample, first_tensor
from reference_impl.signatures import SlotKind, signature
from reference_impl.torch_registry import op_overload

from .cases import ELIGIBILITY_CALL_KINDS, Case, other_device
from .runner import (
    Outcome,
    call_entry,
    capture,
    intercepted,
    make_inputs,
    plan_for,
    reference_spec,
    resolve_mix,
    run_native,
    run_oracle,
    state_for,
    tensor_dtypes,
)
from .target import Target


def lower_of(case: Case) -> torch.dtype:
    return dtype_of(case.dtype)


def entry_sample(target: Target, case: Case, entry: str) -> Sample:
    info = target.spec.ops[case.op]
    if entry == case.op or entry.startswith("aten::"):
        return info.samples[case.sample]
    for ep in info.entry_points:
        if ep.name == entry:
            return entry_point_sample(ep, info.samples)
    return entry_point_sample(EntryPoint(entry), info.samples)


@dataclass
class PolicyResult:
    inputs: Materialized
    native: Outcome
    expected: Outcome
    plan: str


def _plan_text(target: Target, lower: torch.dtype, op: str, m: Materialized) -> str:
    try:
        p = plan_for(target, lower, op, m)
    except Exception as e:  # the plan is context for the reader only
        return f"(no plan: {e})"
    casts = ", ".join(
        f"{'.'.join(map(str, c.path))} {str(c.from_dtype)[6:]}->{str(c.to_dtype)[6:]}" for c in p.casts
    )
    extra = f"; dtype={str(p.set_dtype)[6:]}" if p.set_dtype is not None else ""
    return f"{p.reason}" + (f" [{casts}]" if casts else "") + extra


def policy_call(target: Target, case: Case, entry: str, mix: tuple[str, ...] | None = None) -> PolicyResult:
    """Native autocast through ``entry`` vs the reference oracle on the same inputs.

    The reference always calls the aten op itself: every entry point must behave
    like the op it reaches.
    """
    lower = lower_of(case)
    dtypes = resolve_mix(mix or case.mix, case.dtype)
    sample = entry_sample(target, case, entry)
    with target.tensors():
        m = make_inputs(sample, dtypes, target.device, seed=case.seed)
        native = run_native(target, lower, lambda: call_entry(case.op, entry, m))
        op_inputs = m  # an entry point's own sample: the reference still gets these inputs
        expected = _reference(target, lower, case.op, entry, op_inputs)
        plan = _plan_text(target, lower, case.op, op_inputs)
        by_interception = target.policy_only or target.spec.ops[case.op].intercept_only
        if by_interception and native.error is not None:
            return _policy_by_interception(target, case, lower, m, native, plan, entry)
        if expected.error is not None and target.policy_only:
            expected = _from_plan(target, lower, case.op, op_inputs, expected)
    return PolicyResult(m, native, expected, plan)


def _from_plan(target: Target, lower: torch.dtype, op: str, m: Materialized, failed: Outcome) -> Outcome:
    """Policy-only: where a kernel cannot run on FakeTensors, the dtype the policy engine names.

    Only the first output's dtype is known then (``Outcome.first_only``).
    """

    try:
        plan = plan_for(target, lower, op, m)
    except Exception:
        return failed
    if plan.raises is not None:
        return Outcome(error=RuntimeError(plan.raises))
    dtype = expected_output_dtype(plan, state_for(target, lower))
    if dtype is None:
        return failed
    return Outcome(value=torch.empty(0, dtype=dtype, device="meta"), first_only=True)


def expected_arrival(target: Target, lower: torch.dtype, op: str, m: Materialized) -> tuple[str, list[str]]:
    """The overload the plan calls and the tensor dtypes it should receive below Autocast."""

    plan = plan_for(target, lower, op, m)
    to = {c.path: dtype_name(c.to_dtype) for c in plan.casts}
    return plan.target_op, [to.get(path, dtype_name(t.dtype)) for path, t in m.tensor_paths()]


def _policy_by_interception(
    target: Target, case: Case, lower: torch.dtype, m: Materialized, native: Outcome, plan: str, entry: str
) -> PolicyResult:
    """Policy-only, where the kernel cannot run on FakeTensors, or on any backend, where it
    cannot run the samples (``intercept_only``): compare what arrives below Autocast with
    the plan (the kernel never runs, so its FakeTensor support does not matter).

    The op's own arguments are recorded with autocast off (an entry point may rearrange
    them), the plan is decided on them, and the call under autocast must match it.
    """
    call = lambda: call_entry(case.op, entry, m)  # noqa: E731
    off, err = intercepted(target, lower, case.op, call, enabled=False)
    if not off:
        return PolicyResult(
            m, native, Outcome(error=err or RuntimeError(f"{entry} does not reach {case.op}")), plan
        )
    first = Materialized(tuple(off[0].args), dict(off[0].kwargs))
    target_op, want = expected_arrival(target, lower, off[0].op, first)
    on, _ = intercepted(target, lower, case.op, call)
    got = _arrived(on, target_op)
    if got is None:
        return PolicyResult(m, native, Outcome(value=None), plan)
    meta = lambda ds: [torch.empty(0, dtype=dtype_of(d), device="meta") for d in ds]  # noqa: E731
    return PolicyResult(
        m, Outcome(value=meta(got)), Outcome(value=meta(want)), plan + " (observed below Autocast)"
    )


def _reference(target: Target, lower: torch.dtype, op: str, entry: str, m: Materialized) -> Outcome:
    """The oracle for the aten op; for another entry point, the oracle when the sample fits the op.

    Entry points whose own sample does not fit the aten schema (``torch.nn.functional``
    wrappers) are compared with the native call of the aten op instead, which the
    op-policy test of the aten op itself checks against the oracle.
    """
    out = run_oracle(target, lower, op, m)
    if out.error is None or entry == op:
        return out
    return run_native_reference_through_entry(target, lower, op, entry, m)


def run_native_reference_through_entry(
    target: Target, lower: torch.dtype, op: str, entry: str, m: Materialized
) -> Outcome:
    """Reference for an entry point whose arguments are not the op's: apply the op's plan.

    Record the aten call the entry point makes below Autocast *with autocast off*,
    then run the oracle on that call's arguments.
    """
    calls, err = intercepted(target, lower, op, lambda: call_entry(op, entry, m), enabled=False)
    if not calls:
        return Outcome(error=err or RuntimeError(f"{entry} does not reach {op}"))
    c = calls[0]
    with target.tensors():
        return run_oracle(target, lower, c.op, Materialized(tuple(c.args), dict(c.kwargs)))


def tolerance(target: Target, case: Case) -> Tolerance | None:
    """None (bitwise) when the reference runs on the backend itself and the op is deterministic."""
    info = target.spec.ops[case.op]
    if target.reference_device == target.device and not info.nondeterministic:
        return None
    return target.spec.tolerance(case.op, case.dtype)


def numerics_call(target: Target, case: Case) -> PolicyResult:
    """Native on the backend vs the oracle on the reference device (same seeded values)."""
    lower = lower_of(case)
    dtypes = resolve_mix(case.mix, case.dtype)
    sample = target.spec.ops[case.op].samples[case.sample]
    m = make_inputs(sample, dtypes, target.device, seed=case.seed)
    native = run_native(target, lower, lambda: call_entry(case.op, case.op, m))
    ref_dev = target.reference_device
    rm = make_inputs(sample, dtypes, ref_dev, seed=case.seed) if ref_dev != target.device else m
    if ref_dev == target.device:
        expected = run_oracle(target, lower, case.op, rm)
    else:
        ref_spec = reference_spec(target)
        state = AutocastState(target.device, lower)
        # The plan is decided for the backend, then applied to reference-device tensors.
        with quiet():
            expected = capture(lambda: _oracle_on(ref_spec, state, case.op, rm, ref_dev, oracle_call))
        if expected.error is not None:
            # The reference device cannot run this call (no kernel: CUDA's fused RNN cells on
            # a CPU reference; or its kernel refuses a dtype mix the backend's accepts): the
            # oracle runs on the backend, as it does without --reference-device.
            expected = run_oracle(target, lower, case.op, m)
    return PolicyResult(m, native, expected, _plan_text(target, lower, case.op, m))


def _oracle_on(spec: Any, state: Any, op: str, m: Materialized, device: str, oracle_call: Any) -> Any:

    ref_state = AutocastState(device, state.dtype, True)
    return oracle_call(spec.with_device(device, spec.device(state.device)), ref_state, op, m.args, m.kwargs)


# ---------------------------------------------------------------------------
# Eligibility: calls autocast must leave alone
# ---------------------------------------------------------------------------


@dataclass
class Untouched:
    inputs: Materialized | None
    given: list[str]
    arrived: list[str] | None
    error: BaseException | None
    entry: str
    why: str
    # Output dtypes under autocast and without it, where both calls run: an
    # ineligible call must also keep its dtype arguments (no dtype set or appended
    # that would change the result).
    outputs: tuple[tuple[str, ...], tuple[str, ...]] | None = None


def _arrived(calls: list[Any], name: str) -> list[str] | None:
    for c in calls:
        if c.op == name:
            return tensor_dtypes([*c.args, *c.kwargs.values()])
    return None


def eligibility_call(target: Target, case: Case) -> Untouched:
    """Call the op (or its in-place/out= variant) and record what reaches the kernel below Autocast."""
    lower = lower_of(case)
    sample = target.spec.ops[case.op].samples[0]
    if case.kind == "other_device":
        return _other_device_call(target, case, lower, sample)
    with target.tensors():
        m = make_inputs(sample, resolve_mix(case.mix, case.dtype), target.device)
        args, kwargs = list(m.args), dict(m.kwargs)
        entry = case.entry
        if case.kind == "out":
            kwargs.update(out_arguments(entry, next(t for t in m.tensors())))
        m2 = Materialized(tuple(args), kwargs)

        fn = op_overload(entry)
        calls, err = intercepted(target, lower, entry, lambda: fn(*m2.args, **m2.kwargs))
        outputs = None
        if case.kind not in ELIGIBILITY_CALL_KINDS:
            on = run_native(target, lower, lambda: fn(*m2.args, **m2.kwargs))
            with quiet():
                off = capture(lambda: fn(*m2.args, **m2.kwargs))
            if on.error is None and off.error is None:
                outputs = (on.dtypes, off.dtypes)
    why = {
        "int64": "integer tensors are not floating point (rules.eligibility.floating_only)",
        "bool": "bool tensors are not floating point (rules.eligibility.floating_only)",
        "inplace": "in-place variants are not autocast (rules.out_of_place_only)",
        "out": "out= variants are not autocast (rules.out_of_place_only)",
    }.get(case.kind, f"{case.kind} is never cast (rules.eligibility.never_cast)")
    given = tensor_dtypes([*m2.args, *m2.kwargs.values()])
    # fp32_append_dtype redispatches to another overload even for ineligible inputs
    # (appending their own dtype): follow the call the reference plan names.
    arrives_as = entry
    if case.kind not in ELIGIBILITY_CALL_KINDS:
        arrives_as = plan_for(target, lower, entry, m2).target_op
    return Untouched(m2, given, _arrived(calls, arrives_as), err, arrives_as, why, outputs)


def out_arguments(out_op: str, like: torch.Tensor) -> dict[str, torch.Tensor]:
    """The written-to keyword arguments of an ``out=`` overload (``out``, or ``Q``/``R``...)."""

    return {
        a.name: torch.empty_like(like)
        for a in op_overload(out_op)._schema.arguments
        if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
    }


def _other_device_call(target: Target, case: Case, lower: torch.dtype, sample: Sample) -> Untouched:
    """Tensors of another device type run as without autocast (their output dtypes match)."""
    dev = other_device(target.device)
    dtypes = resolve_mix(case.mix, case.dtype)
    m = make_inputs(sample, dtypes, dev)
    plain = capture(lambda: call_entry(case.op, case.op, m))
    with quiet(), target.autocast(lower):
        native = capture(lambda: call_entry(case.op, case.op, m))
    why = f"tensors on {dev} are not on the autocast device (rules.eligibility.same_device_only)"
    err = native.error if native.error is not None and plain.error is None else None
    arrived = None if err is not None else list(native.dtypes)
    return Untouched(m, list(plain.dtypes), arrived, err, case.op, why)


def unlisted_call(target: Target, case: Case) -> Untouched:
    """An op the device does not list: its inputs reach the kernel in the dtypes given."""
    lower = lower_of(case)
    dt = resolve_mix(case.mix, case.dtype)
    with target.tensors():
        info = target.spec.op_info(case.op)
        if info is not None and info.samples:
            m = make_inputs(info.samples[0], dt, target.device)
        else:
            args, kwargs = synthesize_call(
                case.op, lambda i: torch.ones(2, 2, dtype=dt[0], device=target.device)
            )
            m = Materialized(args, kwargs)

        fn = op_overload(case.op)
        calls, err = intercepted(target, lower, case.op, lambda: fn(*m.args, **m.kwargs))
    given = tensor_dtypes([*m.args, *m.kwargs.values()])
    why = f"{case.op} is not in the {target.device} spec: it must run in its input dtype"
    return Untouched(m, given, _arrived(calls, case.op), err, case.op, why)


def explicit_dtype_call(target: Target, case: Case) -> PolicyResult:
    """The op with its optional dtype argument given explicitly (float64), lower inputs."""

    lower = lower_of(case)
    sample = target.spec.ops[case.op].samples[0]
    slot = next(s for s in signature(case.op).slots if s.kind is SlotKind.OPTIONAL_DTYPE)
    with target.tensors():
        m0 = make_inputs(sample, resolve_mix(case.mix, case.dtype), target.device)
        m = Materialized(m0.args, {**m0.kwargs, slot.name: torch.float64})
        native = run_native(target, lower, lambda: call_entry(case.op, case.op, m))
        expected = run_oracle(target, lower, case.op, m)
        plan = _plan_text(target, lower, case.op, m)
    return PolicyResult(m, native, expected, plan)


@dataclass
class AutogradSide:
    grad_dtypes: list[str]
    backward_dtypes: list[str]
    error: str = ""


@dataclass
class AutogradResult:
    inputs: Materialized
    native: AutogradSide
    reference: AutogradSide


def _forward_backward(fn: Any, leaves: list[torch.Tensor]) -> AutogradSide:
    """Run ``fn`` (the forward), then backward outside autocast; record dtypes."""

    seen: list[str] = []
    try:
        with quiet():
            out = first_tensor(fn())
            if out is None or out.grad_fn is None:
                return AutogradSide([], [], "the output does not require grad")
            out.grad_fn.register_hook(
                lambda gi, go: seen.extend(dtype_name(g.dtype) for g in gi if g is not None)
            )
            out.float().abs().sum().backward()
    except Exception as e:
        return AutogradSide([], [], f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
    grads = [dtype_name(t.grad.dtype) if t.grad is not None else "None" for t in leaves]
    return AutogradSide(grads, seen)


def autograd_call(target: Target, case: Case) -> AutogradResult:
    """Native: forward under autocast, backward outside it. Reference: the oracle's explicit casts."""
    lower = lower_of(case)
    sample = target.spec.ops[case.op].samples[0]
    dtypes = resolve_mix(case.mix, case.dtype)

    def leaves_of(m: Materialized) -> list[torch.Tensor]:
        return [t for t in m.tensors() if t.is_floating_point() and t.requires_grad]

    with target.tensors():
        m = make_inputs(sample, dtypes, target.device, requires_grad=True)
        r = make_inputs(sample, dtypes, target.device, requires_grad=True)

        def native_fwd() -> Any:
            with target.autocast(lower):
                return call_entry(case.op, case.op, m)

        native = _forward_backward(native_fwd, leaves_of(m))
        reference = _forward_backward(
            lambda: oracle_call(reference_spec(target), state_for(target, lower), case.op, r.args, r.kwargs),
            leaves_of(r),
        )
    return AutogradResult(m, native, reference)

"""Procedures for the checks that look below or around the op call (promote arrivals,
checkpoint recompute, functorch transforms); tests call one function here and judge it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from reference_impl.dtypes import dtype_name
from reference_impl.runtime import quiet
from reference_impl.samples import Materialized, first_tensor, output_tensors

from .cases import Case
from .checks import _arrived, expected_arrival, lower_of
from .runner import (
    call_entry,
    intercepted,
    make_inputs,
    plan_for,
    resolve_mix,
    run_oracle,
)
from .target import Target

FLOATING = ("float16", "bfloat16", "float32", "float64")


def arrival_label(dtypes: list[str], lower: str) -> str:
    """The distinct floating dtypes arriving below Autocast, the autocast dtype as ``lower``."""
    names = sorted({"lower" if d == lower else d for d in dtypes if d in FLOATING})
    return ",".join(names) or "no floating tensor"


def error_label(e: BaseException, rule_message: str) -> str:
    text = str(e)
    return f"error: {rule_message}" if rule_message in text else f"error: {type(e).__name__}: {text[:200]}"


@dataclass
class Arrival:
    inputs: Materialized
    expected: str
    observed: str
    plan: str


def promote_arrival(target: Target, case: Case) -> Arrival:
    """What the promote rule says the op's tensors arrive as below Autocast, and what arrives."""
    lower = lower_of(case)
    message = target.spec.rules.promote.foreign_float_message
    with target.tensors():
        m = make_inputs(target.spec.ops[case.op].samples[0], resolve_mix(case.mix, case.dtype), target.device)
        plan = plan_for(target, lower, case.op, m)
        if plan.raises is not None:
            expected, target_op = f"error: {plan.raises}", case.op
        else:
            target_op, want = expected_arrival(target, lower, case.op, m)
            expected = arrival_label(want, case.dtype)
        calls, err = intercepted(target, lower, case.op, lambda: call_entry(case.op, case.op, m))
    got = _arrived(calls, target_op)
    if got is not None:
        observed = arrival_label(got, case.dtype)
    else:
        observed = error_label(err, message) if err is not None else f"never reached {target_op}"
    return Arrival(m, expected, observed, plan.reason)


# ---------------------------------------------------------------------------
# torch.utils.checkpoint: the recompute runs under the forward's autocast state
# ---------------------------------------------------------------------------


@dataclass
class GradRun:
    forward_dtypes: list[tuple[str, ...]] = field(default_factory=list)  # one entry per body call
    grads: list[torch.Tensor | None] = field(default_factory=list)
    error: str = ""


def _flat(m: Materialized) -> list[torch.Tensor]:
    return list(m.tensors())


def _rebuild(value: Any, it: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return next(it)
    if isinstance(value, (list, tuple)):
        return type(value)(_rebuild(v, it) for v in value)
    return value


def rebuilt(m: Materialized, tensors: tuple[torch.Tensor, ...] | list[torch.Tensor]) -> Materialized:
    it = iter(tensors)
    args = tuple(_rebuild(a, it) for a in m.args)
    return Materialized(args, {k: _rebuild(v, it) for k, v in m.kwargs.items()})


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"


def grad_run(target: Target, case: Case, wrap: Callable[..., Any] | None) -> tuple[Materialized, GradRun]:
    """Forward under autocast (through ``wrap(body, *tensors)``, e.g. a checkpoint, when
    given), backward outside it; the body records its output dtypes on every call."""
    lower = lower_of(case)
    run = GradRun()
    m = make_inputs(
        target.spec.ops[case.op].samples[0],
        resolve_mix(case.mix, case.dtype),
        target.device,
        requires_grad=True,
    )
    leaves = [t for t in _flat(m) if t.requires_grad]

    def body(*tensors: torch.Tensor) -> torch.Tensor:
        out = call_entry(case.op, case.op, rebuilt(m, tensors))
        # floating outputs only: under no_grad (the reentrant forward) some kernels skip workspaces
        floating = [t for t in output_tensors(out) if t.is_floating_point()]
        run.forward_dtypes.append(tuple(dtype_name(t.dtype) for t in floating))
        first = first_tensor(out)
        assert first is not None
        return first

    try:
        with quiet():
            with target.autocast(lower):
                out = wrap(body, *_flat(m)) if wrap else body(*_flat(m))
            if not out.requires_grad:
                return m, GradRun(error="the output does not require grad")
            out.float().abs().sum().backward()
    except Exception as e:
        run.error = _error(e)
        return m, run
    run.grads = [t.grad for t in leaves]
    return m, run


def checkpointed(reentrant: bool) -> Callable[..., Any]:

    return lambda body, *ts: checkpoint(body, *ts, use_reentrant=reentrant)


def grads_differ(a: list[torch.Tensor | None], b: list[torch.Tensor | None]) -> str | None:
    """Why two gradient lists differ (dtype, presence, values bitwise with NaNs equal), or None."""
    if len(a) != len(b):
        return f"{len(a)} gradients against {len(b)}"
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if (x is None) != (y is None):
            says = ["None" if g is None else "present" for g in (x, y)]
            return f"gradient {i}: {says[0]} against {says[1]}"
        if x is None or y is None:
            continue
        if x.dtype != y.dtype:
            return f"gradient {i}: {dtype_name(x.dtype)} against {dtype_name(y.dtype)}"
        same = (x == y) | (torch.isnan(x) & torch.isnan(y))
        if not bool(same.all()):
            err = float((x.double() - y.double()).abs().nan_to_num(nan=float("inf")).max())
            return f"gradient {i}: values differ (max abs error {err})"
    return None


# ---------------------------------------------------------------------------
# torch.vmap / torch.func.grad
# ---------------------------------------------------------------------------

BATCH = 2


@dataclass
class Transformed:
    inputs: Materialized
    expected: tuple[str, ...]
    observed: tuple[str, ...]
    error: str = ""
    reference_error: str = ""


def functorch_call(target: Target, case: Case) -> Transformed:
    """The op's first sample through ``case.kind`` (vmap or grad) under autocast; the
    output dtypes the op has inside the transform against the reference's."""
    lower = lower_of(case)
    m = make_inputs(target.spec.ops[case.op].samples[0], resolve_mix(case.mix, case.dtype), target.device)
    ref = run_oracle(target, lower, case.op, m)
    if ref.error is not None:
        return Transformed(m, (), (), reference_error=_error(ref.error))
    seen: list[tuple[str, ...]] = []
    flat = _flat(m)

    def body(*tensors: torch.Tensor) -> Any:
        out = call_entry(case.op, case.op, rebuilt(m, tensors))
        seen.append(tuple(dtype_name(t.dtype) for t in output_tensors(out)))
        return out

    try:
        with quiet(), target.autocast(lower):
            if case.kind == "vmap":
                batched = [torch.stack([t] * BATCH) for t in flat]
                torch.vmap(body)(*batched)
            else:
                k = next(i for i, t in enumerate(flat) if t.is_floating_point())

                def loss(x: torch.Tensor) -> torch.Tensor:
                    ts = list(flat)
                    ts[k] = x
                    first = first_tensor(body(*ts))
                    assert first is not None
                    return first.float().sum()

                torch.func.grad(loss)(flat[k])
    except Exception as e:
        return Transformed(m, ref.dtypes, tuple(seen[0]) if seen else (), error=_error(e))
    return Transformed(m, ref.dtypes, seen[0] if seen else ())

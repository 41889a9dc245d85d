"""autograd: gradient dtypes and backward under autocast; ``torch.utils.checkpoint`` recompute.

Cases, per dtype under test, for every lower_precision_fp and fp32 op with samples, on the
policy's discriminating mix:

* forward under autocast, backward outside it (``test_grad_dtypes``);
* the same through ``torch.utils.checkpoint`` with ``use_reentrant`` True and False
  (``test_checkpoint_recompute``).

Procedure and expectation: the reference is the same forward written with the oracle's
explicit casts, so float32 leaves get float32 gradients and the op's backward runs in the
dtypes its forward computed in: the gradient dtypes and the dtypes the op's backward
receives must be the reference's. Checkpoint's recompute runs under the forward's autocast
state: the recomputed forward gives the forward's dtypes, and the gradients are bitwise
those of the call without checkpoint.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name
from reference_impl.engine.oracle import oracle_call
from reference_impl.harness.samples import Materialized, call, first_tensor, output_tensors
from reference_impl.harness.state import quiet

from ..kit.calls import state_for
from ..kit.case import Case, listed_ops
from ..kit.category import Category, owes
from ..kit.inputs import make_inputs, rebuilt, resolve_mix
from ..kit.verdict import Observation, not_applicable, one_line
from ..target import Target

GRAD_DTYPES = "autograd.grad_dtypes"
CHECKPOINT = "autograd.checkpoint"
GRAD_POLICIES = (Policy.LOWER_PRECISION_FP, Policy.FP32)


class Checkpointed(enum.Enum):
    """``torch.utils.checkpoint`` with or without ``use_reentrant``."""

    REENTRANT = "checkpoint_reentrant"
    NON_REENTRANT = "checkpoint_non_reentrant"


def cases(target: Target) -> list[Case[None]]:
    return [lo.case(target, "autograd") for lo in listed_ops(target, GRAD_POLICIES)]


def checkpoint_cases(target: Target) -> list[Case[Checkpointed]]:
    return [
        lo.case(target, "autograd", params=c)
        for lo in listed_ops(target, GRAD_POLICIES)
        for c in Checkpointed
    ]


CATEGORY = Category(
    "autograd",
    __doc__,
    checks=(GRAD_DTYPES, CHECKPOINT),
    generators=(cases, checkpoint_cases),
    owed=owes(*GRAD_POLICIES),
    needs_output=True,
    runs_kernel=True,
)


@dataclass
class Side:
    """One forward and backward: the leaves' gradient dtypes and what the op's backward received."""

    grads: list[str] = field(default_factory=list)
    backward: list[str] = field(default_factory=list)
    error: str = ""

    def seen(self) -> dict[str, Any]:
        return {"error": self.error} if self.error else {"gradients": self.grads, "backward": self.backward}


def _forward_backward(fn: Callable[[], Any], leaves: list[torch.Tensor]) -> Side:
    seen: list[str] = []
    try:
        with quiet():
            out = first_tensor(fn())
            if out is None or out.grad_fn is None:
                return Side(error="the output does not require grad")
            out.grad_fn.register_hook(
                lambda gi, go: seen.extend(dtype_name(g.dtype) for g in gi if g is not None)
            )
            out.float().abs().sum().backward()
    except Exception as e:
        return Side(error=one_line(e))
    return Side([dtype_name(t.grad.dtype) if t.grad is not None else "None" for t in leaves], seen)


def derivative_mismatch(
    target: Target, case: Case, check: str, error: str, m: Materialized
) -> Observation | None:
    """Whether the op's backward ran (``error`` empty) as the op catalog says.

    Declared ``no_derivative`` and it raised: not applicable (the reason). Undeclared and it
    raised, or declared and it ran: an observation that fails (fix the sample or the catalog).
    None: it ran, as it should."""
    info = target.spec.ops[case.op]
    if error and info.no_derivative:
        not_applicable(f"no derivative (op catalog {info.loc}): {info.no_derivative}")
    if error.startswith("NotImplementedError: Could not run"):  # the reference's backward too
        not_applicable(f"the device has no kernel for the op's backward: {error}")
    if error:
        what = "the op's backward runs on its first sample (else the op catalog declares no_derivative)"
        return Observation(case, check, what, "backward runs", f"error: {error}", m)
    if info.no_derivative:
        what = f"the op catalog declares no derivative ({info.no_derivative}) but the backward ran"
        return Observation(case, check, what, "no derivative", "backward runs", m)
    return None


def grad_dtypes(target: Target, case: Case) -> Observation:
    """Native: forward under autocast, backward outside. Reference: the oracle's explicit casts."""
    lower = case.lower
    sample = target.spec.ops[case.op].samples[0]
    dtypes = resolve_mix(case.mix, lower)

    def leaves(m: Materialized) -> list[torch.Tensor]:
        return [t for t in m.tensors() if t.is_floating_point() and t.requires_grad]

    with target.tensors():
        m = make_inputs(sample, dtypes, target.device, requires_grad=True)
        r = make_inputs(sample, dtypes, target.device, requires_grad=True)

        def native_forward() -> Any:
            with target.autocast(lower):
                return call(case.op, m)

        native = _forward_backward(native_forward, leaves(m))
        reference = _forward_backward(
            lambda: oracle_call(target.reference_spec, state_for(target, lower), case.op, r.args, r.kwargs),
            leaves(r),
        )
    undeclared = derivative_mismatch(target, case, GRAD_DTYPES, reference.error, m)
    if undeclared is not None:
        return undeclared
    what = "gradient dtypes or the op's backward dtypes differ from the reference's explicit casts"
    return Observation(case, GRAD_DTYPES, what, reference.seen(), native.seen(), m)


@dataclass
class GradRun:
    forward_dtypes: list[tuple[str, ...]] = field(default_factory=list)  # one entry per body call
    grads: list[torch.Tensor | None] = field(default_factory=list)
    error: str = ""


def grad_run(
    target: Target, case: Case, wrap: Callable[..., Any] | None, enabled: bool = True
) -> tuple[Materialized, GradRun]:
    """Forward under autocast (through ``wrap(body, *tensors)``, e.g. a checkpoint, when
    given; ``enabled=False``: in a disabled region), backward outside it; the body records
    its output dtypes on every call."""
    lower = case.lower
    run = GradRun()
    m = make_inputs(
        target.spec.ops[case.op].samples[0],
        resolve_mix(case.mix, lower),
        target.device,
        requires_grad=True,
    )
    leaves = [t for t in m.tensors() if t.requires_grad]

    def body(*tensors: torch.Tensor) -> torch.Tensor:
        out = call(case.op, rebuilt(m, tensors))
        # floating outputs only: under no_grad (the reentrant forward) some kernels skip workspaces
        run.forward_dtypes.append(
            tuple(dtype_name(t.dtype) for t in output_tensors(out) if t.is_floating_point())
        )
        first = first_tensor(out)
        assert first is not None
        return first

    try:
        with quiet():
            with target.autocast(lower, enabled=enabled):
                out = wrap(body, *m.tensors()) if wrap else body(*m.tensors())
            if not out.requires_grad:
                return m, GradRun(error="the output does not require grad")
            out.float().abs().sum().backward()
    except Exception as e:
        run.error = one_line(e)
        return m, run
    run.grads = [t.grad for t in leaves]
    return m, run


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


def recompute(target: Target, case: Case[Checkpointed]) -> Observation:
    """The checkpointed call computes in the forward's dtypes and gets the plain call's gradients."""
    m, plain = grad_run(target, case, None)
    undeclared = derivative_mismatch(target, case, CHECKPOINT, plain.error, m)
    if undeclared is not None:
        return undeclared
    reentrant = case.params is Checkpointed.REENTRANT

    def wrapped(body: Callable[..., Any], *ts: torch.Tensor) -> Any:
        return checkpoint(body, *ts, use_reentrant=reentrant)

    _, ck = grad_run(target, case, wrapped)
    what = f"torch.utils.checkpoint ({case.params_label.removeprefix('checkpoint_')}) under autocast"
    if ck.error:
        return Observation(case, CHECKPOINT, f"{what} raised", "runs", f"error: {ck.error}", m)
    calls = max(len(ck.forward_dtypes), 1)
    expected = {
        "forward, then recompute": plain.forward_dtypes[:1] * calls,
        "gradients": "as without checkpoint",
    }
    observed = {
        "forward, then recompute": ck.forward_dtypes,
        "gradients": grads_differ(ck.grads, plain.grads) or "as without checkpoint",
    }
    return Observation(
        case, CHECKPOINT, f"{what}: the recompute differs from the forward", expected, observed, m
    )

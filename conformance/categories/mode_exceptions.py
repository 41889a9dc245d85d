"""mode_exceptions: an exception escaping an autocast region, in each selected mode.

Cases: the exception raised while tracing (``shape``: the sentinel op with shapes that do
not fit) or by a kernel at run time inside the graph (``runtime``: an index out of
range, on CPU tensors), with autocast off or on (float16) around the call.

Procedure: the call in each selected mode; under ``compile`` with the chosen backend and
with Dynamo's own graph (backend ``eager``): restoring the state is Dynamo's job whatever
the backend.
Expectation (``rules.context.exception_restores_state``): the state is as before: enabled,
dtype, cache flag and the nesting depth (a leaked depth keeps the cast cache from ever
being cleared). Where the mode traces the program when it is built (trace, export), the
``shape`` error is raised while tracing: a tracer that swallows it (pytorch#153202: non-strict
export's autocast exit returned true) builds a program from a function that raised.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import torch

from reference_impl.harness.samples import Materialized, materialize
from reference_impl.harness.state import autocast_state_kept
from reference_impl.modes.run import Mode, fresh_in_mode, run_in_mode

from ..kit.case import Case, sentinel_op
from ..kit.category import Category
from ..kit.inputs import rebuilt
from ..kit.state import autocast_fields
from ..kit.verdict import Observation, not_applicable
from ..target import Target

STATE_RESTORED = "mode_exceptions.state_restored"
AS_BEFORE = "state as before"
# modes whose program is traced when built: an error raised in the region while tracing must
# escape the tracer (a tracer that swallows it builds a program from a function that raised)
TRACED_WHEN_BUILT = (Mode.TRACE, Mode.EXPORT)
TRACING = "raised while tracing"


class Outer(enum.Enum):
    """The autocast state around the call."""

    OFF = "off"
    FLOAT16 = "float16"  # enabled, float16 (set directly, not by a region)


class Raised(enum.Enum):
    """Where the exception is raised."""

    SHAPE = "shape"  # while tracing: the sentinel op with shapes that do not fit
    RUNTIME = "runtime"  # by a kernel at run time inside the graph: an index out of range


@dataclass(frozen=True)
class Escaping:
    outer: Outer
    error: Raised
    WHOLE_ID: ClassVar[bool] = True
    ID: ClassVar[str] = "{outer}-{error}"


def cases(target: Target) -> list[Case[Escaping]]:
    if not target.dtypes:  # a backend without autocast: no region to escape
        return []
    return [
        Case("mode_exceptions", target.device, target.dtypes[0], params=Escaping(o, e))
        for o in Outer
        for e in Raised
    ]


CATEGORY = Category(
    "mode_exceptions",
    __doc__,
    checks=(STATE_RESTORED,),
    generators=(cases,),
    mandatory_able=False,
)


def _raising_call(target: Target, kind: Raised) -> tuple[str, Materialized] | None:
    """A call that raises inside the region (None: the spec has no op to raise in)."""
    dev = target.device
    if kind is Raised.RUNTIME:
        # on CPU tensors whatever the backend: a lazy backend (torch_xla) raises only when a
        # value is read, and a device-side index error can end a CUDA context
        return "Tensor.__getitem__", Materialized((torch.rand(4, 4), torch.tensor([99])), {})
    op = sentinel_op(target)
    if op is None:
        return None
    m = materialize(target.spec.ops[op].samples[0], torch.float32, dev)
    tensors = m.tensors()
    last = max(i for i, t in enumerate(tensors) if t.is_floating_point())
    tensors[last] = torch.rand([n + 1 for n in tensors[last].shape], device=dev)
    return op, rebuilt(m, tensors)


def _raises(
    mode: Mode, fn: str, m: Materialized, dev: str, dtype: torch.dtype, backend: str, error: Raised
) -> str | None:
    """Where the call raised: while tracing (building the program), at run time, or None."""
    if error is not Raised.SHAPE or mode not in TRACED_WHEN_BUILT:
        try:
            run_in_mode(mode, fn, m.args, m.kwargs, device=dev, dtype=dtype, backend=backend)
        except Exception:  # any error from the bad arguments
            return "raised"
        return None
    try:
        call = fresh_in_mode(mode, fn, m.args, m.kwargs, device=dev, dtype=dtype, backend=backend)
    except Exception:
        return TRACING
    try:
        call()
    except Exception:
        return "raised only when the program ran: the tracer swallowed it"
    return None


def escaping(target: Target, case: Case[Escaping]) -> Iterator[Observation]:
    """One observation per (mode, backend) run, in order: under ``compile`` with the run's
    backend and with Dynamo's own graph (backend ``eager``): restoring the state is Dynamo's
    job whatever the backend."""
    if target.policy_only:
        not_applicable("--policy-only: script/trace/compile need the backend's kernels")
    p, dtype = case.params, case.dtype
    assert p is not None and dtype is not None
    dev = target.device
    call = _raising_call(target, p.error)
    if call is None:
        yield Observation(
            case, STATE_RESTORED, "no call to raise in", "a lower_precision_fp op with samples", "none"
        )
        return
    fn, m = call
    runs = [
        (mode, b)
        for mode in target.modes
        for b in (dict.fromkeys((*target.compile_backends, "eager")) if mode is Mode.COMPILE else ("eager",))
    ]
    for mode, b in runs:
        with autocast_state_kept(dev):
            if p.outer is Outer.FLOAT16:
                torch.set_autocast_enabled(dev, True)
                torch.set_autocast_dtype(dev, torch.float16)
            before = autocast_fields(dev)
            raised = _raises(mode, fn, m, dev, dtype, b, p.error)
            after = autocast_fields(dev)
        where = f"{mode.value} (backend {b})" if mode is Mode.COMPILE else mode.value
        reproduce = f"pytest conformance --mode {mode.value} -k 'restores_state and {p.error.value}'"
        if raised is None:
            yield Observation(case, STATE_RESTORED, f"{where}: the call did not raise", "an error", "it ran")
        elif p.error is Raised.SHAPE and mode in TRACED_WHEN_BUILT:
            what = f"{where}: an error raised in the region while tracing escapes the tracer"
            yield Observation(case, STATE_RESTORED, what, TRACING, raised, reproduce=reproduce)
        yield Observation(
            case,
            STATE_RESTORED,
            f"{where}: autocast state after an exception ({p.error.value}) escaped the region",
            AS_BEFORE,
            before.changed(after) or AS_BEFORE,
            facts={"before": before, "after": after},
            reproduce=reproduce,
        )

"""An exception escaping an autocast region, in each selected mode (``test_modes.py``).

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

from collections.abc import Iterator

import torch

from reference_impl.engine.dtypes import dtype_of
from reference_impl.harness.samples import Materialized, materialize
from reference_impl.harness.state import autocast_state_kept

from ..kit.case import Case, sentinel_op
from ..kit.inputs import rebuilt
from ..kit.state import autocast_fields
from ..kit.verdict import Observation, not_applicable
from ..target import Target
from .run import fresh_in_mode, run_in_mode

EXCEPTION_STATE = "modes.exception_state"
ERRORS = ("shape", "runtime")
OUTER = ("off", "float16")
AS_BEFORE = "state as before"
# modes whose program is traced when built: an error raised in the region while tracing must
# escape the tracer (a tracer that swallows it builds a program from a function that raised)
TRACED_WHEN_BUILT = ("trace", "export")
TRACING = "raised while tracing"


def _raising_call(target: Target, kind: str) -> tuple[str, Materialized] | None:
    """A call that raises inside the region (None: the spec has no op to raise in)."""
    dev = target.device
    if kind == "runtime":
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
    mode: str, fn: str, m: Materialized, dev: str, dtype: torch.dtype, backend: str, error: str
) -> str | None:
    """Where the call raised: while tracing (building the program), at run time, or None."""
    if error != "shape" or mode not in TRACED_WHEN_BUILT:
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


def escaping(
    target: Target, modes: tuple[str, ...], backend: str, outer: str, error: str
) -> Iterator[Observation]:
    """One observation per (mode, backend) run, in order."""
    if target.policy_only:
        not_applicable("--policy-only: script/trace/compile need the backend's kernels")
    dev = target.device
    case = Case("jit", dev, target.dtypes[0])
    call = _raising_call(target, error)
    if call is None:
        yield Observation(
            case, EXCEPTION_STATE, "no call to raise in", "a lower_precision_fp op with samples", "none"
        )
        return
    fn, m = call
    runs = [
        (mode, b)
        for mode in modes
        for b in (dict.fromkeys((backend, "eager")) if mode == "compile" else (backend,))
    ]
    for mode, b in runs:
        with autocast_state_kept(dev):
            if outer == "float16":
                torch.set_autocast_enabled(dev, True)
                torch.set_autocast_dtype(dev, torch.float16)
            before = autocast_fields(dev)
            raised = _raises(mode, fn, m, dev, dtype_of(target.dtypes[0]), b, error)
            after = autocast_fields(dev)
        where = f"{mode} (backend {b})" if mode == "compile" else mode
        if raised is None:
            yield Observation(case, EXCEPTION_STATE, f"{where}: the call did not raise", "an error", "it ran")
        elif error == "shape" and mode in TRACED_WHEN_BUILT:
            yield Observation(
                case,
                EXCEPTION_STATE,
                f"{where}: an error raised in the region while tracing escapes the tracer",
                TRACING,
                raised,
                reproduce=f"pytest conformance --mode {mode} -k 'restores_state and {error}'",
            )
        yield Observation(
            case,
            EXCEPTION_STATE,
            f"{where}: autocast state after an exception ({error}) escaped the region",
            AS_BEFORE,
            before.changed(after) or AS_BEFORE,
            facts={"before": before, "after": after},
            reproduce=f"pytest conformance --mode {mode} -k 'restores_state and {error}'",
        )

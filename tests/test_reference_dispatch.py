"""reference_impl.autocast in the dispatcher: its kernels installed once and switched on per thread,
native kernels untouched, above Autograd, and devices above the borrowed key.

Ops are chosen from the spec by policy, never by name.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
from helpers.reference_helpers import (
    CPU,
    LOWER,
    OFF,
    SPEC,
    dispatch_table,
    out_dtype,
    reference_key_state,
    spec_without,
)
from torch.utils._python_dispatch import TorchDispatchMode

import reference_impl
from autocast_spec.model import Policy
from reference_impl.engine import torch_registry
from reference_impl.harness import devices
from reference_impl.harness.samples import materialize, op_overload
from reference_impl.kernels.reference_autocast import registered

# --- where the kernels sit: installed once, switched on per thread ---


def test_regions_register_nothing_and_native_kernels_stay() -> None:
    with reference_impl.autocast("cpu"):  # the first region installs the reference key's kernels
        pass
    table = dispatch_table()
    with reference_impl.autocast("cpu"), reference_impl.autocast("cpu", dtype=torch.float16):
        assert dispatch_table() == table, "entering a region changed the dispatcher's tables"
    assert dispatch_table() == table
    native = {op: d for op, d in table.items() if op in torch_registry.autocast_registrations("AutocastCPU")}
    overridden = [op for op, dump in native.items() if "AutocastCPU (inactive)" in dump]
    assert not overridden, f"native AutocastCPU kernels overridden: {overridden[:5]}"


def test_native_autocast_in_another_thread_is_untouched() -> None:
    """A native region in another thread, open while a reference region (with a planted
    deviation: LOWER left alone) is open here, runs native kernels; this thread the spec's."""
    planted = spec_without(LOWER)
    opened, seen = threading.Event(), {}

    def worker() -> None:
        opened.wait(timeout=60)
        with torch.autocast("cpu"), reference_impl.trace_casts() as log:
            seen["native"] = out_dtype(LOWER)
        seen["records"] = len(log)
        seen["key"] = reference_key_state()

    t = threading.Thread(target=worker)
    t.start()
    with reference_impl.autocast("cpu", spec=planted):
        opened.set()
        t.join()
        assert out_dtype(LOWER) == torch.float32  # the planted spec, in this thread
    assert seen == {"native": torch.bfloat16, "records": 0, "key": OFF}


def test_native_behaviour_after_exit_and_after_exception() -> None:
    planted = spec_without(LOWER)
    with reference_impl.autocast("cpu", spec=planted):
        assert out_dtype(LOWER) == torch.float32
    with torch.autocast("cpu"):
        assert out_dtype(LOWER) == torch.bfloat16  # native again
    with pytest.raises(ZeroDivisionError), reference_impl.autocast("cpu", spec=planted):
        _ = 1 / 0
    assert reference_key_state() == OFF
    with torch.autocast("cpu"):
        assert out_dtype(LOWER) == torch.bfloat16


class _BackwardDtypes(TorchDispatchMode):
    """The input dtypes of every op that runs inside the mode."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[torch.dtype, ...]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        dtypes = tuple(a.dtype for a in args if isinstance(a, torch.Tensor))
        self.calls.append((str(func), dtypes))
        return func(*args, **(kwargs or {}))


def _forward_backward(op: str, region: Any) -> tuple[list[str], list[Any], list[torch.dtype | None]]:
    m = materialize(SPEC.ops[op].samples[0], torch.float32, "cpu")
    leaves = [a.requires_grad_() for a in m.args if isinstance(a, torch.Tensor) and a.is_floating_point()]
    with region("cpu"):
        out = op_overload(op)(*m.args, **m.kwargs)
    out = out[0] if isinstance(out, (tuple, list)) else out
    graph = [fn.name() for fn, _ in out.grad_fn.next_functions if fn is not None]
    with _BackwardDtypes() as mode:
        out.float().sum().backward()
    return graph, mode.calls, [t.grad.dtype if t.grad is not None else None for t in leaves]


def _differentiable_lower_op() -> str:
    """The first cpu lower_precision_fp op whose first sample has a backward."""
    for op in CPU.ops_with(Policy.LOWER_PRECISION_FP):
        if op in SPEC.ops and SPEC.ops[op].samples:
            try:
                _forward_backward(op, torch.autocast)
            except RuntimeError:
                continue
            return op
    raise LookupError("no differentiable lower_precision_fp op with samples")


def test_sits_above_autograd_and_backward_runs_in_forward_dtypes() -> None:
    op = _differentiable_lower_op()
    native = _forward_backward(op, torch.autocast)
    ref = _forward_backward(op, reference_impl.autocast)
    graph, calls, grads = ref
    assert any("ToCopyBackward" in g for g in graph), f"casts not recorded by autograd: {graph}"
    assert any(torch.bfloat16 in dtypes for _, dtypes in calls), calls  # backward in the lower dtype
    assert ref == native, f"reference {ref}\nnative {native}"
    assert set(grads) == {torch.float32}


def _runs_on_fake_cuda(op: str) -> bool:
    """Whether ``op``'s first sample runs in float16 on cuda FakeTensors in this torch (some
    fake kernels need a driver: torch 2.11's CUDA wheel, convolution, no GPU)."""
    try:
        with devices.tensor_context("cuda", fake=True):
            m = materialize(SPEC.ops[op].samples[0], torch.float16, "cuda")
            op_overload(op)(*m.args, **m.kwargs)
    except Exception:
        return False
    return True


def test_devices_above_the_borrowed_key_register_while_open() -> None:
    """cuda's Autocast key ranks above the borrowed one: its kernels are registered at
    AutocastCUDA while a region is open (FakeTensors: no GPU needed), then removed."""
    cuda = SPEC.device("cuda")
    ops = [o for o in cuda.ops_with(Policy.LOWER_PRECISION_FP) if o in SPEC.ops and SPEC.ops[o].samples]
    op = next(o for o in ops if _runs_on_fake_cuda(o))
    table = torch._C._dispatch_dump(op)
    with devices.tensor_context("cuda", fake=True):
        m = materialize(SPEC.ops[op].samples[0], torch.float32, "cuda")
        with reference_impl.autocast("cuda"):
            assert registered("cuda") and torch._C._dispatch_dump(op) != table
            out = op_overload(op)(*m.args, **m.kwargs)
    assert (out[0] if isinstance(out, (tuple, list)) else out).dtype == torch.float16
    assert not registered("cuda") and torch._C._dispatch_dump(op) == table

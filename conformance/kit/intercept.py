"""What arrives right below the backend's Autocast key, and the sentinel call.

A recording kernel at the Autograd key right below Autocast records each call to an op's
name and stops it before any kernel runs (:func:`reference_impl.harness.calls.intercept`), so
shapes do not matter and nothing executes. The sentinel is the device's first
lower_precision_fp op on float32 inputs: the context, cache and transition checks watch
it to see whether autocast acts and what it cast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name
from reference_impl.engine.torch_registry import op_overload
from reference_impl.harness.calls import Call, Intercepted, autograd_key_for, intercept
from reference_impl.harness.samples import Materialized, first_tensor, resolve_entry_point
from reference_impl.harness.state import quiet

from ..target import Target
from .case import sentinel_op
from .inputs import make_inputs


def call_entry(op: str, entry: str, m: Materialized) -> Any:
    """Call ``entry`` (a public entry point such as ``torch.mm``, or the aten op itself)."""
    if entry == op or entry.startswith("aten::"):
        return op_overload(entry)(*m.args, **m.kwargs)
    return resolve_entry_point(entry)(*m.args, **m.kwargs)


def intercepted(
    target: Target, lower: torch.dtype, op: str, fn: Callable[[], Any], enabled: bool = True
) -> tuple[list[Call], BaseException | None]:
    """The calls to ``op``'s name that arrive right below the backend's Autocast key while
    ``fn`` runs under the autocast under test (``enabled`` or not), and any other error."""
    key = autograd_key_for(target.dispatch_key)
    error: BaseException | None = None
    with quiet(), target.autocast(lower, enabled), intercept(op, key) as calls:
        try:
            fn()
        except Intercepted:
            pass
        except Exception as e:
            error = e
    return calls, error


def tensor_dtypes(values: Sequence[Any]) -> list[str]:
    """The dtype names of the tensors among ``values`` (lists walked), in order."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            out.append(dtype_name(v.dtype))
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    for v in values:
        walk(v)
    return out


def arrived(calls: Sequence[Call], name: str) -> list[str] | None:
    """The tensor dtypes of the first recorded call of overload ``name``; None if none arrived."""
    for c in calls:
        if c.op == name:
            return tensor_dtypes([*c.args, *c.kwargs.values()])
    return None


@dataclass
class Sentinel:
    """The device's first lower_precision_fp op (:func:`.case.sentinel_op`) on given inputs."""

    target: Target
    op: str
    inputs: Materialized

    def output_dtype(self) -> str:
        """The output dtype of a real call (the lower dtype when autocast acts, else float32)."""
        with quiet():
            out = first_tensor(call_entry(self.op, self.op, self.inputs))
        assert out is not None, f"{self.op} returned no tensor"
        return dtype_name(out.dtype)

    def arrived(self) -> list[Any]:
        """The arguments as they arrive below Autocast (nothing runs): at the Autograd key, or
        at the backend key where the call skips Autograd (under inference_mode, or when every
        tensor that arrives is an inference tensor, such as a cast cached under inference_mode)."""
        autograd = autograd_key_for(self.target.dispatch_key)
        backend = getattr(torch._C.DispatchKey, self.target.dispatch_key.removeprefix("Autocast"))
        with (
            quiet(),
            intercept(self.op, autograd) as above,
            intercept(self.op, backend) as below,
            contextlib.suppress(Intercepted),
        ):
            call_entry(self.op, self.op, self.inputs)
        calls = above or below
        assert calls, f"{self.op} did not reach the kernel below Autocast"
        return [*calls[0].args, *calls[0].kwargs.values()]


def make_sentinel(target: Target, requires_grad: bool = False) -> Sentinel:
    """The sentinel on float32 inputs (weights with ``requires_grad``)."""
    op = sentinel_op(target, Policy.LOWER_PRECISION_FP)
    if op is None:
        pytest.fail(
            f"the {target.device} spec lists no lower_precision_fp op with samples to test autocast with",
            pytrace=False,
        )
    with target.tensors():
        m = make_inputs(
            target.spec.ops[op].samples[0], (torch.float32,), target.device, requires_grad=requires_grad
        )
    return Sentinel(target, op, m)

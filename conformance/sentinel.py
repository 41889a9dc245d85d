"""The sentinel call of context and cache tests: does autocast act here, and what did it cast?"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from autocast_spec.model import Policy
from reference_impl.dtypes import dtype_name
from reference_impl.runtime import Intercepted, autograd_key_for, intercept, quiet
from reference_impl.samples import Materialized

from .cases import sentinel_op
from .runner import call_entry, make_inputs
from .target import Target


@dataclass
class Sentinel:
    """Calls the device's first lower_precision_fp op on float32 inputs."""

    target: Target
    op: str
    inputs: Materialized

    def output_dtype(self) -> str:
        """The output dtype of a real call (``lower`` when autocast acts, else float32)."""
        with quiet():
            out = call_entry(self.op, self.op, self.inputs)
        t = out if isinstance(out, torch.Tensor) else out[0]
        return dtype_name(t.dtype)

    def arrived(self, below_autograd: bool = False) -> list[Any]:
        """The tensors as they arrive below Autocast (nothing runs).

        ``below_autograd``: catch them at the backend key instead (inference_mode
        skips the Autograd key).
        """
        key = autograd_key_for(self.target.dispatch_key)
        if below_autograd:
            key = getattr(torch._C.DispatchKey, self.target.dispatch_key.removeprefix("Autocast"))
        with quiet(), intercept(self.op, key) as calls, contextlib.suppress(Intercepted):
            call_entry(self.op, self.op, self.inputs)
        assert calls, f"{self.op} did not reach the kernel below Autocast"
        return [*calls[0].args, *calls[0].kwargs.values()]


def flat_tensors(values: list[Any]) -> list[torch.Tensor]:
    """The tensors among ``values`` (tensor lists flattened), in order."""
    out: list[torch.Tensor] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


def autocast_acts(target: Target, lower: torch.dtype) -> str | None:
    """None when the autocast under test really enables on this backend here, else why not."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with target.autocast_impl(target.device, dtype=lower):
            on = torch.is_autocast_enabled(target.device)
    if on:
        return None
    why = "; ".join(str(x.message).splitlines()[0] for x in w) or "it stays disabled"
    return f"autocast({target.device!r}) does not enable on this machine ({why})"


def require_autocast(target: Target, lower: torch.dtype) -> None:
    """Skip the test unless the autocast under test enables here (context tests need it)."""
    why = autocast_acts(target, lower)
    if why:
        pytest.skip(why)


def make_sentinel(target: Target, requires_grad: bool = False) -> Sentinel:
    op = sentinel_op(target, Policy.LOWER_PRECISION_FP)
    if op is None:
        pytest.fail(
            f"the {target.device} spec lists no lower_precision_fp op with samples to test autocast with"
        )
    with target.tensors():
        m = make_inputs(
            target.spec.ops[op].samples[0], (torch.float32,), target.device, requires_grad=requires_grad
        )
    return Sentinel(target, op, m)

"""Gradients through a compiled autocast region against eager (``test_modes.py``).

Each lower_precision_fp / fp32 op's first sample, with float32 inputs that require grad
(so gradients are float32 and a backward computed in the autocast dtype shows), runs under
an eager ``torch.autocast`` region: called directly in the
function (``region``), or inside a nested ``autocast(enabled=False)`` on inputs upcast to
float32 (``inner_disabled``). The function runs eagerly and through ``torch.compile``;
backward runs outside autocast. The gradients must agree to float32 precision
(:data:`RTOL`, :data:`ATOL`: far below what a float16/bfloat16 computation differs by).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autocast_spec.common import Tolerance
from reference_impl.compare import output_mismatch
from reference_impl.runtime import quiet
from reference_impl.samples import first_tensor, materialize

from .deep_checks import rebuilt
from .runner import call_entry
from .target import Target

VARIANTS = ("region", "inner_disabled")
GRAD_TOLERANCE = Tolerance(atol=1e-5, rtol=1e-4)  # compiled vs eager backward, same dtypes


def _function(op: str, device: str, variant: str, m: Any) -> Callable[..., Any]:
    def fn(*tensors: torch.Tensor) -> Any:
        if variant == "region":
            return first_tensor(call_entry(op, op, rebuilt(m, tensors)))
        up = [t.float() if t.is_floating_point() else t for t in tensors]
        with torch.autocast(device_type=device, enabled=False):
            return first_tensor(call_entry(op, op, rebuilt(m, up)))

    return fn


def gradients(
    target: Target, op: str, lower: torch.dtype | None, variant: str, backend: str | None
) -> list[torch.Tensor | None] | str:
    """The leaves' gradients (eager when ``backend`` is None, else compiled), or the error;
    ``lower`` None: without the outer autocast region."""
    sample = target.spec.ops[op].samples[0]
    m = materialize(sample, torch.float32, target.device)
    leaves = [t.requires_grad_(True) if t.is_floating_point() else t for t in m.tensors()]
    fn = _function(op, target.device, variant, m)
    if backend is not None:
        torch._dynamo.reset()
        fn = torch.compile(fn, backend=backend)
    try:
        with quiet():
            with torch.autocast(device_type=target.device, dtype=lower, enabled=lower is not None):
                out = fn(*leaves)
            if out is None or not out.requires_grad:
                return "the output does not require grad"
            out.float().abs().sum().backward()
    except Exception as e:
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
    return [t.grad if t.is_floating_point() else None for t in leaves]


def compare(eager: list[torch.Tensor | None], compiled: list[torch.Tensor | None] | str, variant: str) -> str:
    """The check's observation: ``same gradients``, ``<variant>: gradients differ`` or the error."""
    if isinstance(compiled, str):
        return f"{variant}: compiled raised {compiled}"
    if output_mismatch(eager, compiled, GRAD_TOLERANCE) is not None:
        return f"{variant}: gradients differ"
    return "same gradients"

"""Gradients through a compiled autocast region against eager (``test_modes.py``).

Cases (with ``--mode compile``): per dtype under test, each lower_precision_fp / fp32 op
with samples that runs on FakeTensors and can run its samples, in each :data:`VARIANTS`.
Each op's first sample, with float32 inputs that require grad
(so gradients are float32 and a backward computed in the autocast dtype shows), runs under
an eager ``torch.autocast`` region: called directly in the
function (``region``), or inside a nested ``autocast(enabled=False)`` on inputs upcast to
float32 (``inner_disabled``). The function runs eagerly and through ``torch.compile``;
backward runs outside autocast. The gradients must agree to float32 precision
(:data:`RTOL`, :data:`ATOL`: far below what a float16/bfloat16 computation differs by).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.common import Tolerance
from reference_impl.engine.dtypes import dtype_of
from reference_impl.harness.compare import output_mismatch
from reference_impl.harness.samples import first_tensor, materialize
from reference_impl.harness.state import quiet

from ..kit.case import Case
from ..kit.inputs import rebuilt
from ..kit.intercept import call_entry
from ..kit.refusal import kernel_gap, raw_call, refusal
from ..kit.verdict import Observation, not_applicable, one_line
from ..target import Target
from .ops import ModeCase, inputs_of

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
        return one_line(e)
    return [t.grad if t.is_floating_point() else None for t in leaves]


def compare(eager: list[torch.Tensor | None], compiled: list[torch.Tensor | None] | str, variant: str) -> str:
    """The check's observation: ``same gradients``, ``<variant>: gradients differ`` or the error."""
    if isinstance(compiled, str):
        return f"{variant}: compiled raised {compiled}"
    if output_mismatch(eager, compiled, GRAD_TOLERANCE) is not None:
        return f"{variant}: gradients differ"
    return "same gradients"


GRADIENTS = "modes.gradients"
GRAD_POLICIES = ("lower_precision_fp", "fp32")


@dataclass(frozen=True)
class GradCase:
    op: str
    dtype: str
    variant: str  # one of VARIANTS
    mode = "compile"  # the mode a certification groups it under: gradients through torch.compile

    @property
    def id(self) -> str:
        return f"grad-{self.op}-{self.dtype}-{self.variant}"


def grad_cases(target: Target) -> list[GradCase]:
    out = []
    for dtype in target.dtypes:
        for op, entry in sorted(target.device_spec.ops.items()):
            info = target.spec.op_info(op)
            runs = info is not None and info.fake_kernel and not info.intercept_only and target.selects(op)
            if entry.policy.value in GRAD_POLICIES and runs:
                out += [GradCase(op, dtype, v) for v in VARIANTS]
    return out


def gradients_match(target: Target, gc: GradCase, backend: str) -> Observation:
    """Backward through a compiled autocast region gives eager's gradients: with the op in
    the region, and inside a nested autocast(enabled=False)."""
    if target.policy_only:
        not_applicable("--policy-only: torch.compile needs the backend's kernels")
    gap = kernel_gap(target, gc.op, gc.dtype)
    if gap:
        not_applicable(gap)
    lower = dtype_of(gc.dtype)
    eager = gradients(target, gc.op, lower, gc.variant, None)
    if isinstance(eager, str):
        not_applicable(f"not differentiable with this sample in eager: {eager}")
    compiled = gradients(target, gc.op, lower, gc.variant, backend)
    if isinstance(compiled, str):
        plain = gradients(target, gc.op, None, gc.variant, backend)
        if isinstance(plain, str):
            not_applicable(f"torch.compile cannot run this sample without autocast either: {plain}")
        raw = raw_call(target, lower, gc.op, inputs_of(target, ModeCase("compile", gc.op, gc.dtype, "lower")))
        reason = refusal(raw.error, raw)
        if reason is not None and one_line(raw.error).split(": ", 1)[-1][:200] in compiled:
            not_applicable(f"{reason} (the compiled run computed in {gc.dtype})")
    return Observation(
        Case("jit", target.device, gc.dtype, op=gc.op, entry=gc.op),
        GRADIENTS,
        f"compile (backend {backend}): gradients ({gc.variant}) differ from eager",
        "same gradients",
        compare(eager, compiled, gc.variant),
        reproduce=f"pytest conformance --backend {target.device} --mode compile -k '{gc.id}'",
    )

"""mode_gradients: gradients through a compiled autocast region against eager (``--mode compile``).

Cases (with ``--mode compile``): per dtype under test, each lower_precision_fp / fp32 op
with samples that runs on FakeTensors and can run its samples, in each :class:`Variant`.
Each op's first sample, with float32 inputs that require grad
(so gradients are float32 and a backward computed in the autocast dtype shows), runs under
an eager ``torch.autocast`` region: called directly in the
function (``region``), or inside a nested ``autocast(enabled=False)`` on inputs upcast to
float32 (``inner_disabled``). The function runs eagerly and through ``torch.compile``;
backward runs outside autocast. The gradients must agree to float32 precision
(:data:`GRAD_TOLERANCE`: far below what a float16/bfloat16 computation differs by).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from autocast_spec.common import Tolerance
from autocast_spec.model import Policy
from reference_impl.harness.compare import output_mismatch
from reference_impl.harness.samples import call, first_tensor, materialize
from reference_impl.harness.state import quiet
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND, Mode

from ..kit.calls import run_oracle
from ..kit.case import Case, omitted
from ..kit.category import Category
from ..kit.inputs import rebuilt
from ..kit.refusal import kernel_gap, refusal
from ..kit.verdict import Observation, not_applicable, one_line
from ..target import Target


class Variant(enum.Enum):
    """Where the op runs: directly in the region, or in a nested autocast(enabled=False)."""

    REGION = "region"
    INNER_DISABLED = "inner_disabled"


GRAD_TOLERANCE = Tolerance(atol=1e-5, rtol=1e-4)  # compiled vs eager backward, same dtypes


def _function(op: str, device: str, variant: Variant, m: Any) -> Callable[..., Any]:
    def fn(*tensors: torch.Tensor) -> Any:
        if variant is Variant.REGION:
            return first_tensor(call(op, rebuilt(m, tensors)))
        up = [t.float() if t.is_floating_point() else t for t in tensors]
        with torch.autocast(device_type=device, enabled=False):
            return first_tensor(call(op, rebuilt(m, up)))

    return fn


def gradients(
    target: Target, op: str, lower: torch.dtype | None, variant: Variant, backend: str | None
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


def compare(
    eager: list[torch.Tensor | None], compiled: list[torch.Tensor | None] | str, variant: Variant
) -> str:
    """The check's observation: ``same gradients``, ``<variant>: gradients differ`` or the error."""
    if isinstance(compiled, str):
        return f"{variant.value}: compiled raised {compiled}"
    if output_mismatch(eager, compiled, GRAD_TOLERANCE) is not None:
        return f"{variant.value}: gradients differ"
    return "same gradients"


MATCH_EAGER = "mode_gradients.match_eager"
GRAD_POLICIES = (Policy.LOWER_PRECISION_FP, Policy.FP32)


@dataclass(frozen=True)
class Through:
    """Backward through the op compiled in a region (:class:`Variant`)."""

    variant: Variant
    backend: str = omitted(DEFAULT_COMPILE_BACKEND)  # torch.compile's
    mode: ClassVar[Mode] = Mode.COMPILE  # the mode a certification groups it under
    WHOLE_ID: ClassVar[bool] = True
    ID: ClassVar[str] = "grad{backend}-{op}-{dtype}-{variant}"


def cases(target: Target) -> list[Case[Through]]:
    if Mode.COMPILE not in target.modes:
        return []
    ops = [
        op
        for op, entry in sorted(target.device_spec.ops.items())
        if entry.policy in GRAD_POLICIES
        and (info := target.spec.op_info(op)) is not None
        and info.fake_kernel
        and not info.intercept_only
        and target.selects(op)
    ]
    return [
        Case("mode_gradients", target.device, dtype, op=op, entry=op, params=Through(v, backend))
        for backend in target.compile_backends
        for dtype in target.dtypes
        for op in ops
        for v in Variant
    ]


CATEGORY = Category(
    "mode_gradients",
    __doc__,
    checks=(MATCH_EAGER,),
    generators=(cases,),
    mandatory_able=False,
)


def gradients_match(target: Target, case: Case[Through]) -> Observation:
    """Backward through a compiled autocast region gives eager's gradients: with the op in
    the region, and inside a nested autocast(enabled=False)."""
    lower, through = case.dtype, case.params
    assert lower is not None and through is not None
    variant, backend = through.variant, through.backend
    if target.policy_only:
        not_applicable("--policy-only: torch.compile needs the backend's kernels")
    gap = kernel_gap(target, case.op, lower)
    if gap:
        not_applicable(gap)
    eager = gradients(target, case.op, lower, variant, None)
    if isinstance(eager, str):
        not_applicable(f"not differentiable with this sample in eager: {eager}")
    compiled = gradients(target, case.op, lower, variant, backend)
    if isinstance(compiled, str):
        plain = gradients(target, case.op, None, variant, backend)
        if isinstance(plain, str):
            not_applicable(f"torch.compile cannot run this sample without autocast either: {plain}")
        sample = target.spec.ops[case.op].samples[0]
        raw = run_oracle(target, lower, case.op, materialize(sample, lower, target.device))
        reason = refusal(raw.error, raw)
        if reason is not None and one_line(raw.error).split(": ", 1)[-1][:200] in compiled:
            not_applicable(f"{reason} (the compiled run computed in {case.dtype_text})")
    return Observation(
        case,
        MATCH_EAGER,
        f"compile (backend {backend}): gradients ({variant.value}) differ from eager",
        "same gradients",
        compare(eager, compiled, variant),
        reproduce=f"pytest conformance --backend {target.device} --mode compile --compile-backend {backend} "
        f"-k '{case.id}'",
    )

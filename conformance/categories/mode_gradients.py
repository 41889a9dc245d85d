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

The compiled side runs in batches (one per backend, dtype and variant, as the ``modes``
category's): every selected op that eager can differentiate, each on its own leaves, in one
compiled function, one backward over every op's loss (the ops share no tensor, so each op's
gradients are its own). A batch that fails is split in halves down to the op alone, which then
runs exactly as on its own (:func:`gradients`): one compile per batch, not one per op
(inductor's batch holds the ops that aot_eager's could take: :func:`compiled_gradients`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
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


def compiled_batch(
    target: Target, ops: Sequence[str], lower: torch.dtype, variant: Variant, backend: str
) -> dict[str, list[torch.Tensor | None] | str]:
    """Each op's compiled gradients (or :func:`gradients`' error text), the ops compiled as one
    function and differentiated by one backward; a failing batch is split in halves, and an op
    alone runs as :func:`gradients` runs it."""
    if len(ops) == 1:
        return {ops[0]: gradients(target, ops[0], lower, variant, backend)}
    try:
        return batch_attempt(target, ops, lower, variant, backend)
    except Exception:  # an op that fails alone carries the error (its own run)
        half = len(ops) // 2
        return {
            **compiled_batch(target, ops[:half], lower, variant, backend),
            **compiled_batch(target, ops[half:], lower, variant, backend),
        }


def batch_attempt(
    target: Target, ops: Sequence[str], lower: torch.dtype, variant: Variant, backend: str
) -> dict[str, list[torch.Tensor | None] | str]:
    """:func:`gradients` of every op at once: raises what the compiled forward or backward raises."""
    leaves: list[list[torch.Tensor]] = []
    fns = []
    for op in ops:
        m = materialize(target.spec.ops[op].samples[0], torch.float32, target.device)
        leaves.append([t.requires_grad_(True) if t.is_floating_point() else t for t in m.tensors()])
        fns.append(_function(op, target.device, variant, m))
    bounds = [sum(len(x) for x in leaves[:i]) for i in range(len(leaves) + 1)]

    def every_op(*tensors: torch.Tensor) -> list[Any]:
        return [f(*tensors[a:b]) for f, a, b in zip(fns, bounds, bounds[1:], strict=False)]

    # fullgraph: a graph break in one op's function (one code object for every op) would compile
    # that frame per op and, past Dynamo's recompile limit, run the rest eagerly, unseen; a batch
    # that breaks is split instead, and an op alone runs as on its own (graph breaks allowed)
    torch._dynamo.reset()
    compiled = torch.compile(every_op, backend=backend, fullgraph=True)
    with quiet():
        with torch.autocast(device_type=target.device, dtype=lower):
            outs = compiled(*(t for group in leaves for t in group))
        losses = [o.float().abs().sum() for o in outs if o is not None and o.requires_grad]
        if losses:
            torch.autograd.backward(losses)
    return {
        op: [t.grad if t.is_floating_point() else None for t in group]
        if out is not None and out.requires_grad
        else "the output does not require grad"
        for op, group, out in zip(ops, leaves, outs, strict=True)
    }


# the ids of the cases the run selected (set after collection): a batch holds only those
SELECTED: set[str] = set()
_BATCHES: dict[tuple[Any, ...], dict[str, list[torch.Tensor | None] | str]] = {}


def compiled_gradients(target: Target, case: Case[Through]) -> list[torch.Tensor | None] | str:
    """The case's op's compiled gradients, from its batch: the selected cases of its backend,
    dtype and variant whose op eager can differentiate (run once per process). A backend other
    than aot_eager batches the ops that an aot_eager batch (Dynamo and AOTAutograd, no code
    generation: seconds) could take: the ops that break a graph or fail to trace alone split the
    cheap batch, not the costly one; they run alone, as every op that joins no batch."""
    lower, through = case.dtype, case.params
    assert lower is not None and through is not None
    key = (target.device, lower, through.variant, through.backend)
    if key not in _BATCHES:
        ops = [
            c.op
            for c in cases(target)
            if c.dtype == lower
            and c.params == through
            and (not SELECTED or c.id in SELECTED)
            and not kernel_gap(target, c.op, lower)
            and not isinstance(gradients(target, c.op, lower, through.variant, None), str)
        ]
        if through.backend != DEFAULT_COMPILE_BACKEND:  # find what cannot join, cheaply first
            probe = compiled_batch(target, ops, lower, through.variant, DEFAULT_COMPILE_BACKEND)
            ops = [op for op in ops if not isinstance(probe[op], str)]
        _BATCHES[key] = compiled_batch(target, ops, lower, through.variant, through.backend)
    if case.op not in _BATCHES[key]:  # not in the batch: alone
        return gradients(target, case.op, lower, through.variant, through.backend)
    return _BATCHES[key][case.op]


def compare(
    eager: list[torch.Tensor | None], compiled: list[torch.Tensor | None] | str, variant: Variant
) -> str:
    """The check's observation: ``same gradients``, ``<variant>: gradients differ`` (values),
    ``<variant>: gradient of input <i> missing`` (or ``unexpected``) or the error."""
    if isinstance(compiled, str):
        return f"{variant.value}: compiled raised {compiled}"
    for i, (e, c) in enumerate(zip(eager, compiled, strict=False)):  # lengths: output_mismatch
        if (e is None) != (c is None):  # a gradient dropped or made up: not a value difference
            return f"{variant.value}: gradient of input {i} {'missing' if c is None else 'unexpected'}"
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
    compiled = compiled_gradients(target, case)
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

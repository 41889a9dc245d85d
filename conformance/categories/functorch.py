"""functorch: every listed op's policy holds inside ``torch.vmap`` and ``torch.func.grad``.

Cases, per dtype under test, for every listed op with samples (banned aside), on the
policy's discriminating mix: ``torch.vmap`` (every tensor batched along a new leading
dimension), and for lower_precision_fp / fp32 ops ``torch.func.grad`` (with respect to the
first floating tensor).

Procedure: the op's first sample under autocast inside the transform; the output dtypes
the op has there.
Expectation: the first output's dtype is the reference oracle's. Where torch does not keep
the policy inside a transform, the op catalog's ``functorch_gaps`` declare it (with why):
that observation is an xfail with the declaration's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.harness.samples import first_tensor, output_tensors
from reference_impl.harness.state import quiet

from ..kit.calls import run_oracle
from ..kit.case import Case, listed_ops
from ..kit.inputs import case_inputs, rebuilt
from ..kit.intercept import call_entry
from ..kit.verdict import Declaration, Observation, not_applicable, one_line
from ..target import Target

TRANSFORM = "functorch.transform"
CHECKS = (TRANSFORM,)
GRAD_POLICIES = (Policy.LOWER_PRECISION_FP, Policy.FP32)
BATCH = 2


@dataclass(frozen=True)
class Transform:
    name: str  # vmap | grad

    @property
    def label(self) -> str:
        return self.name


def cases(target: Target) -> list[Case]:
    return [
        lo.case(target, "functorch", variant=Transform(t))
        for lo in listed_ops(target)
        for t in (("vmap", "grad") if lo.policy in GRAD_POLICIES else ("vmap",))
    ]


GENERATORS = {"functorch": cases}


def under_transform(target: Target, case: Case) -> Observation:
    assert isinstance(case.variant, Transform)
    transform = case.variant.name
    lower = dtype_of(case.dtype)
    info = target.spec.ops[case.op]
    m = case_inputs(info.samples[0], case.mix, case.dtype, target.device)
    gap = info.functorch_gap(transform, target.device)
    declared = (
        Declaration("declared functorch gap (op catalog functorch_gaps)", gap, where=str(info.loc))
        if gap
        else None
    )
    ref = run_oracle(target, lower, case.op, m)
    if ref.error is not None:
        not_applicable(f"the reference cannot run this sample: {one_line(ref.error)}")
    seen: list[tuple[str, ...]] = []
    flat = m.tensors()

    def body(*tensors: torch.Tensor) -> Any:
        out = call_entry(case.op, case.op, rebuilt(m, tensors))
        seen.append(tuple(dtype_name(t.dtype) for t in output_tensors(out)))
        return out

    error = None
    try:
        with quiet(), target.autocast(lower):
            if transform == "vmap":
                torch.vmap(body)(*[torch.stack([t] * BATCH) for t in flat])
            else:
                k = next(i for i, t in enumerate(flat) if t.is_floating_point())

                def loss(x: torch.Tensor) -> torch.Tensor:
                    ts = list(flat)
                    ts[k] = x
                    first = first_tensor(body(*ts))
                    assert first is not None
                    return first.float().sum()

                torch.func.grad(loss)(flat[k])
    except Exception as e:
        error = e
    name = "torch.vmap" if transform == "vmap" else "torch.func.grad"
    observed = f"error: {one_line(error)}" if error is not None else ", ".join(seen[0][:1] if seen else ())
    return Observation(
        case,
        TRANSFORM,
        f"output dtype under {name} and autocast differs from the spec",
        ", ".join(ref.dtypes[:1]),
        observed,
        m,
        facts={
            "hint": "a transform that cannot run the sample is declared in the op catalog's functorch_gaps"
        },
        declared=declared,
    )

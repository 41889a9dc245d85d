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

import enum
from typing import Any

import torch

from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.samples import call, first_tensor, output_tensors
from reference_impl.harness.state import quiet

from ..kit.calls import run_oracle
from ..kit.case import Case, listed_ops
from ..kit.category import Category
from ..kit.inputs import case_inputs, rebuilt
from ..kit.verdict import Declaration, Observation, not_applicable, one_line
from ..target import Target

TRANSFORM = "functorch.transform"
GRAD_POLICIES = (Policy.LOWER_PRECISION_FP, Policy.FP32)
BATCH = 2


class Transform(enum.Enum):
    """The functorch transform the op runs under (the op catalog's functorch_gaps name it)."""

    VMAP = "vmap"
    GRAD = "grad"


def cases(target: Target) -> list[Case[Transform]]:
    return [
        lo.case(target, "functorch", params=t)
        for lo in listed_ops(target)
        for t in ((Transform.VMAP, Transform.GRAD) if lo.policy in GRAD_POLICIES else (Transform.VMAP,))
    ]


CATEGORY = Category(
    "functorch",
    __doc__,
    checks=(TRANSFORM,),
    generators=(cases,),
    needs_output=True,
    runs_kernel=True,
)


def under_transform(target: Target, case: Case[Transform]) -> Observation:
    transform, lower = case.params, case.dtype
    assert transform is not None and lower is not None
    info = target.spec.ops[case.op]
    m = case_inputs(info.samples[0], case.mix, lower, target.device)
    gap = info.functorch_gap(transform.value, target.device)
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
        out = call(case.op, rebuilt(m, tensors))
        seen.append(tuple(dtype_name(t.dtype) for t in output_tensors(out)))
        return out

    error = None
    try:
        with quiet(), target.autocast(lower):
            if transform is Transform.VMAP:
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
    name = "torch.vmap" if transform is Transform.VMAP else "torch.func.grad"
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

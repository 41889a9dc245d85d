"""torch.vmap / torch.func.grad: every listed op's policy holds inside the transforms.

Each op's first sample runs under autocast through ``torch.vmap`` (every tensor batched
along a new leading dimension) and, for lower_precision_fp / fp32 ops, through
``torch.func.grad`` (with respect to its first floating tensor); the op's output dtypes
inside the transform must be the reference's. Ops whose sample cannot run under the
transforms, or where torch does not keep the policy inside them, are declared in the op
catalog's ``functorch_gaps`` (with why): their failures are reported xfail with that reason.
"""

from __future__ import annotations

import pytest

from conformance.assertions import fail
from conformance.cases import Case
from conformance.deep_checks import functorch_call
from conformance.target import Target


@pytest.mark.real_tensors
@pytest.mark.conformance_cases("functorch")
def test_policy_under_transform(target: Target, case: Case) -> None:
    r = functorch_call(target, case)
    gap = target.spec.ops[case.op].functorch_gaps.get(case.kind)
    if gap and (r.error or r.observed[:1] != r.expected[:1]):
        pytest.xfail(f"declared functorch gap (op catalog functorch_gaps): {gap}")
    if r.reference_error:
        pytest.skip(f"the reference cannot run this sample: {r.reference_error}")
    if r.error:
        fail(
            case,
            f"the op raised under torch.{'vmap' if case.kind == 'vmap' else 'func.grad'} and autocast",
            r.inputs,
            error=r.error,
            hint="a transform that cannot run the sample is declared in the op catalog's functorch_gaps",
        )
    if r.observed[:1] != r.expected[:1]:
        fail(
            case,
            f"output dtype under {case.kind} differs from the spec",
            r.inputs,
            expected=", ".join(r.expected),
            observed=", ".join(r.observed),
        )

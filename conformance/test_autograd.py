"""Autograd under autocast: gradients and the op's backward dtypes match the reference's explicit casts.

The reference is the same forward written with explicit ``.to()`` casts (the oracle),
so float32 leaves get float32 gradients and the op's backward runs in the dtypes
its forward computed in.
"""

from __future__ import annotations

import pytest

from conformance.assertions import fail
from conformance.cases import Case
from conformance.checks import autograd_call
from conformance.deep_checks import checkpointed, grad_run, grads_differ
from conformance.target import Target


@pytest.mark.requires_kernels  # backward through FakeTensors is not reliable (crashes on some ops)
@pytest.mark.conformance_cases("autograd")
def test_grad_dtypes(target: Target, case: Case) -> None:
    r = autograd_call(target, case)
    if r.reference.error:
        pytest.skip(f"not differentiable with this sample (the reference fails too: {r.reference.error})")
    if r.native.error:
        fail(case, "forward/backward under autocast raised", r.inputs, error=r.native.error)
    if r.native.grad_dtypes != r.reference.grad_dtypes:
        fail(
            case,
            "gradient dtypes differ from the reference",
            r.inputs,
            expected=r.reference.grad_dtypes,
            observed=r.native.grad_dtypes,
        )
    if r.native.backward_dtypes != r.reference.backward_dtypes:
        fail(
            case,
            "the op's backward ran in other dtypes than the reference's",
            r.inputs,
            expected=r.reference.backward_dtypes,
            observed=r.native.backward_dtypes,
        )


@pytest.mark.real_tensors
@pytest.mark.requires_kernels
@pytest.mark.conformance_cases("checkpoint")
def test_checkpoint_recompute(target: Target, case: Case) -> None:
    """torch.utils.checkpoint's recompute runs under the forward's autocast state (enabled,
    dtype, cache): the checkpointed call computes in the same dtypes and gets the same
    gradients as the plain one (use_reentrant True and False)."""
    m, plain = grad_run(target, case, None)
    if plain.error:
        pytest.skip(f"not differentiable with this sample without checkpoint: {plain.error}")
    _, ck = grad_run(target, case, checkpointed(case.kind == "checkpoint_reentrant"))
    what = f"torch.utils.checkpoint ({case.kind.removeprefix('checkpoint_')})"
    if ck.error:
        fail(case, f"{what} under autocast raised", m, error=ck.error)
    if ck.forward_dtypes[:1] != plain.forward_dtypes[:1] or len(set(ck.forward_dtypes)) != 1:
        fail(
            case,
            f"{what}: the recomputed forward ran in other dtypes than the forward",
            m,
            plain_forward=plain.forward_dtypes,
            checkpoint_forward_then_recompute=ck.forward_dtypes,
        )
    why = grads_differ(ck.grads, plain.grads)
    if why:
        fail(case, f"{what}: gradients differ from the call without checkpoint", m, difference=why)

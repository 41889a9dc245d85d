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

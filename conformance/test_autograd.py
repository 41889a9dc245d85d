"""autograd: gradient dtypes and backward under autocast; torch.utils.checkpoint recompute
(categories/autograd.py)."""

from __future__ import annotations

import pytest

from conformance.categories import autograd
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.requires_kernels  # backward through FakeTensors is not reliable (crashes on some ops)
@pytest.mark.conformance_cases("autograd")
def test_grad_dtypes(target: Target, case: Case) -> None:
    expect(target, autograd.grad_dtypes(target, case))


@pytest.mark.real_tensors
@pytest.mark.requires_kernels
@pytest.mark.conformance_cases("checkpoint")
def test_checkpoint_recompute(target: Target, case: Case) -> None:
    expect(target, autograd.recompute(target, case))

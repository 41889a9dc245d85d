"""The autograd category's tests: conformance/categories/autograd.py."""

from __future__ import annotations

import pytest

from conformance.categories import autograd
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.requires_kernels  # backward through FakeTensors is not reliable (crashes on some ops)
@conformance_cases(autograd.cases)
def test_grad_dtypes(target: Target, case: Case) -> None:
    expect(target, autograd.grad_dtypes(target, case))


@pytest.mark.real_tensors
@pytest.mark.requires_kernels
@conformance_cases(autograd.checkpoint_cases)
def test_checkpoint_recompute(target: Target, case: Case) -> None:
    expect(target, autograd.recompute(target, case))

"""functorch: every listed op's policy under torch.vmap and torch.func.grad (categories/functorch.py)."""

from __future__ import annotations

import pytest

from conformance.categories import functorch
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.real_tensors
@pytest.mark.conformance_cases("functorch")
def test_policy_under_transform(target: Target, case: Case) -> None:
    expect(target, functorch.under_transform(target, case))

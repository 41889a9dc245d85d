"""The cache category's tests: conformance/categories/cache.py."""

from __future__ import annotations

import pytest
import torch

from conformance.categories import cache
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target

pytestmark = [pytest.mark.cache, pytest.mark.real_tensors]


@conformance_cases(cache.cases)
def test_cache(target: Target, case: Case) -> None:
    expect(target, cache.scenario(target, case))


@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode"])
def test_no_growth_over_iterations(target: Target, lower: torch.dtype, grad_mode: str) -> None:
    expect(target, cache.growth(target, lower, grad_mode))

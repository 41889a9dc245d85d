"""The functorch category's tests: conformance/categories/functorch.py."""

from __future__ import annotations

import pytest

from conformance.categories import functorch
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.real_tensors
@conformance_cases(functorch.cases)
def test_policy_under_transform(target: Target, case: Case) -> None:
    expect(target, functorch.under_transform(target, case))

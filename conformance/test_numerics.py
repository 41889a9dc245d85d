"""The numerics category's tests: conformance/categories/numerics.py."""

from __future__ import annotations

import pytest

from conformance.categories import numerics
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.requires_kernels
@conformance_cases(numerics.cases)
def test_numerics(target: Target, case: Case) -> None:
    expect(target, numerics.values(target, case))

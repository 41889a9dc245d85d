"""The custom_function category's tests: conformance/categories/custom_function.py."""

from __future__ import annotations

import pytest

from conformance.categories import custom_function
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target

pytestmark = pytest.mark.real_tensors


@conformance_cases(custom_function.cases)
def test_custom_function(target: Target, case: Case) -> None:
    expect(target, custom_function.combination(target, case))

"""registration: the backend registers Autocast kernels for exactly the spec's ops
(categories/registration.py)."""

from __future__ import annotations

import pytest

from conformance.categories import registration
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("registration")
def test_registration(target: Target, case: Case) -> None:
    expect(target, registration.kernel_set(target, case))


@pytest.mark.conformance_cases("higher_order")
def test_higher_order_kernel(target: Target, case: Case) -> None:
    expect(target, registration.higher_order(target, case))

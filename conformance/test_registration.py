"""The registration category's tests: conformance/categories/registration.py."""

from __future__ import annotations

from conformance.categories import registration
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(registration.cases)
def test_registration(target: Target, case: Case) -> None:
    expect(target, registration.kernel_set(target, case))

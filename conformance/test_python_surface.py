"""The python_surface category's tests: conformance/categories/python_surface.py."""

from __future__ import annotations

from conformance.categories import python_surface
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.refusal import skip_if_autocast_raises
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(python_surface.cases)
def test_python_surface(target: Target, case: Case) -> None:
    skip_if_autocast_raises(target, case.dtype)
    expect(target, python_surface.check(target, case))

"""python_surface: the public autocast entry points as spec/python_surface.yaml lists them
(categories/python_surface.py)."""

from __future__ import annotations

import pytest

from conformance.categories import python_surface
from conformance.kit.case import Case
from conformance.kit.refusal import skip_if_autocast_raises
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("python_surface")
def test_python_surface(target: Target, case: Case) -> None:
    skip_if_autocast_raises(target, case.dtype)
    expect(target, python_surface.check(target, case))

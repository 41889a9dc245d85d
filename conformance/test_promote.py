"""promote: mixed inputs go to the widest type (categories/promote.py)."""

from __future__ import annotations

import pytest

from conformance.categories import promote
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("promote")
def test_promote(target: Target, case: Case) -> None:
    expect(target, promote.output_dtypes(target, case))


@pytest.mark.conformance_cases("promote_widest")
def test_promote_widest_argument(target: Target, case: Case) -> None:
    expect(target, promote.arrival(target, case))


@pytest.mark.conformance_cases("promote_foreign")
def test_promote_foreign_float(target: Target, case: Case) -> None:
    expect(target, promote.arrival(target, case))

"""eligibility: float64/int/bool, other-device, in-place and out= calls are not cast
(categories/eligibility.py)."""

from __future__ import annotations

import pytest

from conformance.categories import eligibility
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("eligibility")
def test_eligibility(target: Target, case: Case) -> None:
    expect(target, eligibility.untouched(target, case))

"""Eligibility: float64/int/bool inputs, other-device tensors, in-place and out= calls are not cast."""

from __future__ import annotations

import pytest

from conformance.assertions import assert_untouched
from conformance.cases import Case
from conformance.checks import eligibility_call
from conformance.target import Target


@pytest.mark.conformance_cases("eligibility")
def test_eligibility(target: Target, case: Case) -> None:
    r = eligibility_call(target, case)
    assert_untouched(case, r.given, r.arrived, r.inputs, r.entry, r.error, r.why, r.outputs)

"""Promote: mixed lower/float32 inputs give float32, all-lower stays lower, other mixes as the spec says."""

from __future__ import annotations

import pytest

from conformance.assertions import assert_same_dtypes
from conformance.cases import Case
from conformance.checks import policy_call
from conformance.target import Target


@pytest.mark.conformance_cases("promote")
def test_promote(target: Target, case: Case) -> None:
    r = policy_call(target, case, case.op)
    assert_same_dtypes(case, r.native, r.expected, r.inputs, case.op, r.plan, both_raise_ok=True)

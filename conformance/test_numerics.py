"""Numerics: native output equals the reference oracle's (bitwise on the same device)."""

from __future__ import annotations

import pytest

from conformance.assertions import assert_close_outputs
from conformance.cases import Case
from conformance.checks import numerics_call, tolerance
from conformance.target import Target


@pytest.mark.requires_kernels
@pytest.mark.conformance_cases("numerics")
def test_numerics(target: Target, case: Case) -> None:
    r = numerics_call(target, case)
    assert_close_outputs(
        case,
        r.native,
        r.expected,
        r.inputs,
        tolerance(target, case),
        r.plan,
        target.spec.ops[case.op].scratch_outputs,
    )

"""fp32_set_opt_dtype: an explicit dtype= argument is respected (autocast sets only an unset one)."""

from __future__ import annotations

import pytest

from conformance.assertions import assert_same_dtypes, fail
from conformance.cases import Case
from conformance.checks import explicit_dtype_call
from conformance.target import Target


@pytest.mark.conformance_cases("opt_dtype")
def test_explicit_dtype_respected(target: Target, case: Case) -> None:
    r = explicit_dtype_call(target, case)
    assert_same_dtypes(case, r.native, r.expected, r.inputs, case.op, r.plan)
    if r.native.dtypes and r.native.dtypes[0] != "float64":
        fail(case, "the explicit dtype=float64 was overridden", r.inputs, observed=r.native.dtypes)

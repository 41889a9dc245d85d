"""opt_dtype: fp32_set_opt_dtype respects an explicit dtype= (categories/opt_dtype.py)."""

from __future__ import annotations

import pytest

from conformance.categories import opt_dtype
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("opt_dtype")
def test_explicit_dtype_respected(target: Target, case: Case) -> None:
    expect(target, opt_dtype.explicit_dtype(target, case))

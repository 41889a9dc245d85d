"""The opt_dtype category's tests: conformance/categories/opt_dtype.py."""

from __future__ import annotations

from conformance.categories import opt_dtype
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(opt_dtype.cases)
def test_explicit_dtype_respected(target: Target, case: Case) -> None:
    expect(target, opt_dtype.explicit_dtype(target, case))

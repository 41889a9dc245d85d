"""The one output comparison (reference_impl.harness.compare): each rule of its docstring."""

from __future__ import annotations

import math

import pytest
import torch

from autocast_spec.common import Tolerance
from reference_impl.harness.compare import output_mismatch

NAN = float("nan")
LOOSE = Tolerance(atol=1e-2, rtol=0.0)
F = torch.tensor


@pytest.mark.parametrize(
    ("expected", "actual", "tolerance", "scratch", "what"),
    [
        # equal cases
        (F([1.0, NAN]), F([1.0, NAN]), None, (), None),
        (F([1.0, NAN]), F([1.005, NAN]), LOOSE, (), None),
        ((F([1]), 2.0), (F([1]), 2.0), None, (), None),
        ((F([1.0]), NAN), (F([1.0]), NAN), None, (), None),
        ((F([1.0]), F([7.0])), (F([1.0]), F([9.0])), None, (1,), None),
        ([None, F([1.0])], [None, F([1.0])], None, (), None),
        # differences
        (F([1.0, NAN]), F([1.0, 2.0]), None, (), "values"),
        (F([1.0, 2.0]), F([1.0, NAN]), LOOSE, (), "values"),
        (F([1.0]), F([1.0 + 1e-6]), None, (), "values"),
        (F([1.0]), F([1.05]), LOOSE, (), "values"),
        (F([1, 2]), F([1, 3]), LOOSE, (), "values"),  # integers stay exact under a tolerance
        (F([True]), F([False]), LOOSE, (), "values"),
        (F([1.0]), F([1.0], dtype=torch.float64), None, (), "dtype"),
        (F([1.0]), F([[1.0]]), None, (), "shape"),
        ((F([1.0]), F([7.0])), (F([1.0]), F([7.0], dtype=torch.half)), None, (1,), "dtype"),
        ((F([1.0]), F([1.0])), (F([1.0]),), None, (), "structure"),
        ((F([1.0]), 2.0), (F([1.0]), 3.0), None, (), "value"),
        ([None, F([1.0])], [F([1.0]), F([1.0])], None, (), "type"),
    ],
)
def test_rule(
    expected: object, actual: object, tolerance: Tolerance | None, scratch: tuple[int, ...], what: str | None
) -> None:
    m = output_mismatch(expected, actual, tolerance, scratch)
    assert (m.what if m else None) == what, m


def test_values_mismatch_reports_the_error() -> None:
    m = output_mismatch(F([1.0, 2.0]), F([1.0, 2.5]))
    assert m is not None and m.where == "out" and math.isclose(m.max_abs_error or 0, 0.5)
    assert "max abs error 0.5" in str(m) and "bitwise" in str(m)

"""One comparison of outputs, for the oracle's tests, the suite and the execution modes.

The rules, in order:

* the structure must match (tuples and lists element by element); a non-tensor value
  must be equal (NaN equals NaN);
* tensors must have the same dtype and shape;
* outputs listed as ``scratch`` (uninitialised workspaces) stop there;
* floating and complex values: bitwise equal without a tolerance (NaN in the same
  places), else within ``atol + rtol * |expected|`` (NaN in the same places);
* integral and boolean values: exactly equal, with or without a tolerance.

Tensors on different devices are compared on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.common import Tolerance


@dataclass(frozen=True)
class Mismatch:
    """Why two outputs differ: where, what, and the evidence."""

    where: str  # "out", "out[1]"
    what: str  # structure, type, value, dtype, shape, values
    expected: Any
    observed: Any
    max_abs_error: float | None = None  # for "values"

    def __str__(self) -> str:
        if self.what == "values":
            return (
                f"{self.where}: values differ (max abs error {self.max_abs_error:.3g}, bound {self.expected})"
            )
        return f"{self.where}: {self.what} expected {self.expected}, got {self.observed}"


def flatten(value: Any, prefix: str = "out") -> list[tuple[str, Any]]:
    """``[(path, leaf)]`` of a nested tuple/list output."""
    if isinstance(value, (list, tuple)):
        out: list[tuple[str, Any]] = []
        for i, v in enumerate(value):
            out.extend(flatten(v, f"{prefix}[{i}]"))
        return out
    return [(prefix, value)]


def max_abs_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a - b|, NaNs in the same places counting as equal (inf where one side is NaN)."""
    if a.numel() == 0:
        return 0.0
    x, y = a.detach().cpu().double(), b.detach().cpu().double()
    d = torch.where(torch.isnan(x) & torch.isnan(y), torch.zeros_like(x), (x - y).abs())
    return float(d.nan_to_num(nan=float("inf")).max())


def bound(tolerance: Tolerance | None) -> str:
    return "bitwise" if tolerance is None else f"atol={tolerance.atol}, rtol={tolerance.rtol}"


def tensor_mismatch(
    expected: torch.Tensor, actual: torch.Tensor, tolerance: Tolerance | None, where: str = "out"
) -> Mismatch | None:
    if expected.dtype != actual.dtype:
        return Mismatch(where, "dtype", expected.dtype, actual.dtype)
    if expected.shape != actual.shape:
        return Mismatch(where, "shape", tuple(expected.shape), tuple(actual.shape))
    e, a = expected.detach().cpu(), actual.detach().cpu()
    if e.is_floating_point() or e.is_complex():
        if tolerance is None:
            same = (e == a) | (torch.isnan(e) & torch.isnan(a))
            ok = bool(same.all())
        else:
            ok = bool(torch.isclose(a, e, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True).all())
    else:
        ok = torch.equal(e, a)
    if ok:
        return None
    return Mismatch(where, "values", bound(tolerance), None, max_abs_error(a, e))


def output_mismatch(
    expected: Any, actual: Any, tolerance: Tolerance | None = None, scratch: Sequence[int] = ()
) -> Mismatch | None:
    """None when ``actual`` matches ``expected`` under the rules above, else the first difference.

    ``scratch``: indices (into the flattened outputs) compared by dtype and shape only."""
    exp, act = flatten(expected), flatten(actual)
    if [n for n, _ in exp] != [n for n, _ in act]:
        return Mismatch("out", "structure", f"{len(exp)} values", f"{len(act)} values")
    for index, ((where, e), (_, a)) in enumerate(zip(exp, act, strict=True)):
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return Mismatch(where, "type", type(e).__name__, type(a).__name__)
        if not isinstance(e, torch.Tensor):
            if e != a and not (e != e and a != a):  # NaN scalars compare unequal
                return Mismatch(where, "value", repr(e), repr(a))
            continue
        if index in scratch:
            if e.dtype != a.dtype or e.shape != a.shape:
                return tensor_mismatch(e, a, tolerance, where)
            continue
        if (m := tensor_mismatch(e, a, tolerance, where)) is not None:
            return m
    return None

"""higher_order: higher-order operators' Python autocast kernels are the spec's, and apply its policy.

A higher-order operator (``flex_attention``) has no C++ schema: its Autocast kernel is a Python
function (``HigherOrderOperator.py_impl``) that a device file states under ``higher_order_ops``
(:mod:`autocast_spec.higher_order`).

Cases: every higher-order operator the spec lists and every one with a Python kernel at the
device's Autocast key, once each; and per dtype under test each listed one, called.
Procedure: ask torch's registry of higher-order operators for the kernel at the key; called on
float32 tensors under autocast, intercept what reaches the Autograd key below.
Expectation: a listed operator has a kernel and a kernel is listed; called, its ``args`` arrive
in the autocast dtype (``lower_precision_fp``) or as given (``none``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from autocast_spec.higher_order import HigherOrderKernel
from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.calls import autograd_key_for
from reference_impl.harness.state import quiet

from ..kit.case import Case, Listing, PolicyPart, shown
from ..kit.category import Category
from ..kit.verdict import Observation, one_line
from ..target import Target

KERNEL = "higher_order.kernel"


@dataclass(frozen=True)
class Kernel:
    """The operator's kernel looked up (``called`` false) or called under autocast."""

    called: bool = shown("called")
    ID: ClassVar[str] = "{called}"


def listed_as(kernel: HigherOrderKernel | None) -> PolicyPart:
    if kernel is None:
        return Listing.UNLISTED
    return Policy.LOWER_PRECISION_FP if kernel.policy == "lower_precision_fp" else Listing.NONE


def _hops() -> dict[str, Any]:
    return dict(torch._ops._higher_order_ops)  # torch's registry of higher-order operators


def _py_kernel(target: Target, name: str) -> Any:
    hop = _hops().get(name)
    # A key Python's DispatchKey enum lacks (AutocastMTIA on 2.13) can hold no Python kernel.
    key = getattr(torch._C.DispatchKey, target.dispatch_key, None)
    return None if hop is None or key is None else hop.py_kernels.get(key)


def cases(target: Target) -> list[Case[Kernel]]:
    """Each higher-order operator listed or registered at the key; each listed one per dtype."""
    listed = {k.op: k for k in target.device_spec.higher_order_ops}
    names = sorted(set(listed) | {n for n in _hops() if _py_kernel(target, n) is not None})
    out = [
        Case(
            "higher_order",
            target.device,
            None,
            listed_as(listed.get(n)),
            f"higher_order::{n}",
            params=Kernel(False),
        )
        for n in names
    ]
    return out + [
        Case(
            "higher_order", target.device, dt, listed_as(listed[n]), f"higher_order::{n}", params=Kernel(True)
        )
        for dt in target.dtypes
        for n in sorted(listed)
    ]


CATEGORY = Category("higher_order", __doc__, checks=(KERNEL,), generators=(cases,), only_where_declared=True)


def kernel(target: Target, case: Case[Kernel]) -> Observation:
    """A listed higher-order operator has a Python kernel at the key and one at the key is
    listed; called, its kernel applies the listed policy to its ``args``."""
    name = case.op.split("::", 1)[1]
    found = _py_kernel(target, name)
    listed = next((k for k in target.device_spec.higher_order_ops if k.op == name), None)
    key = target.dispatch_key
    if case.params is None or not case.params.called:
        policy = listed.policy if listed else ""
        where = f"listed as {policy} ({listed.loc})" if listed else f"not in the {target.device} spec"
        return Observation(
            case,
            KERNEL,
            f"torch.ops.higher_order.{name}: {where}",
            f"{key} {'has' if listed else 'has no'} Python kernel",
            f"{key} {'has' if found is not None else 'has no'} Python kernel",
            reproduce=f'python -c "import torch; print(torch.ops.higher_order.{name}.py_kernels)"',
        )
    assert listed is not None
    lower = case.lower
    want = [case.dtype_text if listed.policy == "lower_precision_fp" else "float32"] * len(listed.args)
    got = _arrival(target, name, found, listed, lower)
    what = (
        f"torch.ops.higher_order.{name} under autocast({case.dtype_text}) on float32 {', '.join(listed.args)}"
    )
    return Observation(case, KERNEL, what, want, got, facts={"rule": f"{listed.policy} ({listed.loc})"})


class _Arrived(Exception):
    pass


def _arrival(target: Target, name: str, kernel: Any, listed: HigherOrderKernel, lower: torch.dtype) -> Any:
    """The dtypes of ``listed.args`` as they reach the Autograd key below Autocast (the rest of
    the kernel's required arguments are passed as empty tuples: a kernel that casts only passes them on)."""
    if kernel is None:
        return f"no Python kernel at {target.dispatch_key}"
    hop = _hops()[name]
    below = autograd_key_for(target.dispatch_key)
    seen: list[str] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.extend(dtype_name(a.dtype) for a in args[: len(listed.args)])
        raise _Arrived

    required = [p for p in inspect.signature(kernel).parameters.values() if p.default is p.empty]
    saved = hop.py_kernels.get(below)
    hop.py_kernels[below] = record
    hop._dispatch_cache.clear()
    try:
        with target.tensors(), quiet():
            x = [torch.randn(1, 1, 16, 8, device=target.device) for _ in listed.args]
            with target.autocast(lower):
                hop(*x, *[()] * (len(required) - len(x)))  # tuples: what a kernel passes on may be joined
    except _Arrived:
        return seen
    except Exception as e:
        return f"raises {one_line(e)}"
    finally:
        if saved is None:
            hop.py_kernels.pop(below, None)
        else:
            hop.py_kernels[below] = saved
        hop._dispatch_cache.clear()
    return "nothing arrived below Autocast"

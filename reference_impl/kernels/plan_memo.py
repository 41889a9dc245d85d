"""The plan memo of the reference's kernels: what a call is keyed on, and what a plan's
casts reduce to when they are all it does.

A kernel asks the policy engine once per kind of call. The key holds what
:func:`reference_impl.engine.policy.decide` may read of the call: the autocast dtype, each
tensor's dtype and device, every other argument by type and value. Whether a cast
argument is a weight (requires grad, a leaf, not a view: the weight-cast cache's rule)
is not in the key: the plan says which casts qualify for the cache
(``ArgCast.cacheable``) and the kernel tests their tensors on every call.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ..engine.oracle import caster
from ..engine.policy import CastPlan
from ..engine.signatures import SlotKind, signature

MEMO_SIZE = 1024  # plans kept per op; the memo starts over when full
_dtype_device = operator.attrgetter("dtype", "device")


def _value_key(v: Any) -> Any:
    """What ``decide`` may read of an argument: a tensor's dtype and device, anything else
    by type and value."""
    if isinstance(v, torch.Tensor):
        return (v.dtype, v.device)
    if isinstance(v, (list, tuple)):
        return (v.__class__, *[_value_key(x) for x in v])
    return (v.__class__, v)


def call_key(dtype: torch.dtype, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """The memo key of a call under autocast ``dtype`` (raises TypeError when an argument is
    unhashable)."""
    key = [_value_key(v) for v in args]
    if kwargs:
        key.extend((k, _value_key(v)) for k, v in kwargs.items())
    return (dtype, *key)


def tensor_call_key(dtype: torch.dtype, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """:func:`call_key` for an op whose positional arguments are all tensors (``Tensor`` or
    ``Tensor?``): built in C when every argument is a tensor, the same key either way."""
    if not kwargs:
        try:
            return (dtype, *map(_dtype_device, args))
        except AttributeError:  # a None for a Tensor? argument
            pass
    return call_key(dtype, args, kwargs)


KeyFn = Callable[[torch.dtype, Sequence[Any], Mapping[str, Any]], Any]


def call_key_for(op: str) -> KeyFn:
    """The key function of ``op``'s memo."""
    kinds = {s.kind for s in signature(op).slots if not s.kwarg_only}
    return tensor_call_key if kinds <= {SlotKind.TENSOR, SlotKind.OPTIONAL_TENSOR} else call_key


Positional = tuple[tuple[int, Callable[[torch.Tensor], torch.Tensor], "torch.dtype | None"], ...]


def positional_casts(plan: CastPlan) -> Positional | None:
    """The plan's casts as (argument index, the function making the cast, the dtype the
    weight cache keeps it under, None for a cast that is never cached) when that is all the
    plan does (no dtype argument, no nested path, no refusal): the kernel then makes them
    without :func:`apply_plan`, calling ``Tensor.bfloat16`` and its kind directly."""
    if plan.raises is not None or plan.append_target is not None or plan.set_dtype is not None:
        return None
    if any(len(c.path) != 2 or c.path[0] != "args" for c in plan.casts):
        return None
    return tuple(
        (int(c.path[1]), caster(c.to_dtype), c.to_dtype if c.cacheable else None) for c in plan.casts
    )


NativePlan = tuple[bool, tuple[tuple[int, torch.dtype, bool], ...]]


def native_plan(plan: CastPlan) -> NativePlan | None:
    """The plan as the C++ kernels keep it, ``(untouched, ((argument index, dtype, cacheable),
    ...))``, when it does no more than positional casts (see :func:`positional_casts`); None
    when the plan needs the Python kernel every time."""
    if plan.untouched:
        return (True, ())
    if positional_casts(plan) is None:
        return None
    return (False, tuple((int(c.path[1]), c.to_dtype, c.cacheable) for c in plan.casts))

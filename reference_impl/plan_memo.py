"""The plan memo of the reference's kernels: what a call is keyed on, and what a plan's
casts reduce to when they are all it does.

A kernel asks the policy engine once per kind of call. The key holds what
:func:`reference_impl.policy.decide` may read: the autocast dtype, each tensor's dtype
and device, and, for an op that can cast a weight-cache candidate, the tensor
properties the cache rule reads (requires_grad, leaf, view, cached); every other
argument by type and value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from autocast_spec.model import DeviceSpec, Spec

from .oracle import caster
from .policy import ArgCast, CastPlan

MEMO_SIZE = 1024  # plans kept per op; the memo starts over when full
_is_cached_tensor = torch._C._is_cached_tensor  # type: ignore[attr-defined]


def _value_key(v: Any) -> Any:
    """What ``decide`` may read of an argument: for a tensor, the properties eligibility and
    the weight-cache rule look at; anything else by type and value."""
    if isinstance(v, torch.Tensor):
        return (v.dtype, v.device, v.requires_grad, v.is_leaf, v._is_view(), _is_cached_tensor(v))
    if isinstance(v, (list, tuple)):
        return (v.__class__, *[_value_key(x) for x in v])
    return (v.__class__, v)


def _call_key(dtype: torch.dtype, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    # Tensors inline (the common case, without a call per argument), the rest by _value_key.
    key = [
        (v.dtype, v.device, v.requires_grad, v.is_leaf, v._is_view(), _is_cached_tensor(v))
        if isinstance(v, torch.Tensor)
        else _value_key(v)
        for v in args
    ]
    if kwargs:
        key.extend((k, _value_key(v)) for k, v in kwargs.items())
    return (dtype, *key)


def _short_key(dtype: torch.dtype, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """``_call_key`` for an op that never casts a weight-cache candidate (its policies are
    not cached, or the device caches nothing): ``decide`` reads only a tensor's dtype and
    device, the weight-cache properties never."""
    key = [(v.dtype, v.device) if isinstance(v, torch.Tensor) else _value_key(v) for v in args]
    if kwargs:
        key.extend((k, _value_key(v)) for k, v in kwargs.items())
    return (dtype, *key)


def _may_cache(op: str, dspec: DeviceSpec, spec: Spec) -> bool:
    """Whether ``op`` can ever cast a weight-cache candidate on this device (under any dtype)."""
    entry = dspec.ops[op]
    policies = {entry.policy, *entry.by_dtype.values()}
    return dspec.cast_cache and any(p in spec.rules.cache.policies for p in policies if p is not None)


Positional = tuple[tuple[int, ArgCast, Callable[[torch.Tensor], torch.Tensor]], ...]


def positional_casts(plan: CastPlan) -> Positional | None:
    """The plan's casts as (argument index, cast, the function making it) when that is all it
    does (no dtype argument, no nested path, no refusal): the kernel then makes them without
    :func:`apply_plan`, calling ``Tensor.bfloat16`` and its kind directly."""
    if plan.raises is not None or plan.append_target is not None or plan.set_dtype is not None:
        return None
    if any(len(c.path) != 2 or c.path[0] != "args" for c in plan.casts):
        return None
    return tuple((int(c.path[1]), c, caster(c.to_dtype)) for c in plan.casts)


KeyFn = Callable[[torch.dtype, Sequence[Any], Mapping[str, Any]], Any]


def call_key_for(op: str, dspec: DeviceSpec, spec: Spec) -> KeyFn:
    """The key function of ``op``'s memo: the short one where no weight is ever cached."""
    return _call_key if _may_cache(op, dspec, spec) else _short_key

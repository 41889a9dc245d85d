"""Which tensors autocast touches: ``is_eligible`` and the weight test of the cast cache.

Both are compiled once from the spec's rules (``rules.eligibility``, ``rules.cache``)
into small callables that the policy engine and the reference's kernels share.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.model import CacheRule, Rules

from .dtypes import dtype_of


@dataclass(frozen=True)
class Eligible:
    """``is_eligible`` compiled from ``rules.eligibility`` for one device."""

    device: str
    floating_only: bool
    never_cast: frozenset[torch.dtype]
    same_device_only: bool

    def __call__(self, t: Any) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        if self.floating_only and not t.is_floating_point():
            return False
        if t.dtype in self.never_cast:
            return False
        return not (self.same_device_only and t.device.type != self.device)


_ELIGIBLE: dict[tuple[int, str], Eligible] = {}


def eligibility(rules: Rules, device: str) -> Eligible:
    key = (id(rules.eligibility), device)
    e = _ELIGIBLE.get(key)
    if e is None:
        r = rules.eligibility
        e = Eligible(
            device, r.floating_only, frozenset(dtype_of(n) for n in r.never_cast), r.same_device_only
        )
        _ELIGIBLE[key] = e
    return e


@functools.cache
def weight_tensor(cache: CacheRule) -> Callable[[torch.Tensor], bool]:
    """The tensor half of ``cached_cast``'s ``can_try_cache``: whether a tensor is a weight
    under ``cache`` (requires grad, a leaf, not a view, as the rule says; never a CUDA-graph
    cached tensor). Built once per rule: the reference's kernels test each cast argument
    with it on every call, since their plan memo does not key on these properties."""
    requires_grad, leaf, views = cache.requires_grad_only, cache.leaf_only, cache.exclude_views
    is_cached = torch._C._is_cached_tensor  # type: ignore[attr-defined]

    def test(t: torch.Tensor) -> bool:
        return (
            (t.requires_grad or not requires_grad)
            and (t.is_leaf or not leaf)
            and not (views and t._is_view())
            and not is_cached(t)  # autocast_mode.h refuses CUDA-graph cached tensors
        )

    return test

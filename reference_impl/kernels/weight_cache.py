"""The reference autocast's weight-cast cache: ``cached_cast`` of ``autocast_mode.cpp``.

Per thread: a weight (a tensor the policy engine's weight test accepts) cast once in a
reference region is served from here by later calls until the region that clears the
cache exits (``rules.cache.cleared_at``). Keyed by the source tensor's identity (and the
target dtype under ``rules.cache.key: source_and_dtype``), with a weak reference that
tells a live source from a new tensor at a reused address.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import torch

from ..engine.oracle import CastFn, caster, to_dtype
from ..engine.policy import ArgCast
from . import fast_kernels


class _Cache(threading.local):
    def __init__(self) -> None:
        # id(source) (or (id(source), dtype)) -> (weakref to source, cast copy)
        self.entries: dict[Any, tuple[weakref.ReferenceType[torch.Tensor], torch.Tensor]] = {}


_CACHE = _Cache()


def clear() -> None:
    """Drop this thread's reference weight-cast cache."""
    _CACHE.entries.clear()
    ext = fast_kernels.loaded()
    if ext is not None:
        ext.cache_clear()


def from_cache(
    src: torch.Tensor, to: torch.dtype, make: Callable[[torch.Tensor], torch.Tensor], by_dtype: bool
) -> tuple[torch.Tensor, bool]:
    """``cached_cast``: the cast copy of a weight, made once per region (by ``make``);
    (copy, served from the cache). Once the C++ kernels are loaded, their cache is the one
    both kinds of kernel use (it makes the copy with ``Tensor.to``, as ``make`` does); copies
    this thread stored here before they were loaded are still served until the cache is
    cleared."""
    ext = fast_kernels.loaded()
    entries = _CACHE.entries
    if ext is not None and not entries:
        hit: tuple[torch.Tensor, bool] = ext.cache_cast(src, to, by_dtype)
        return hit
    key = (id(src), to) if by_dtype else id(src)
    entry = entries.get(key)
    if entry is not None and entry[0]() is src:
        return entry[1], True
    if ext is not None:
        made: tuple[torch.Tensor, bool] = ext.cache_cast(src, to, by_dtype)
        return made
    new = make(src)
    entries[key] = (weakref.ref(src), new)
    return new, False


def cached_cast(by_dtype: bool, weight: Callable[[torch.Tensor], bool]) -> CastFn:
    """The cast callback of :func:`reference_impl.engine.oracle.apply_plan` with the cache on: a cast
    that qualifies (``ArgCast.cacheable``) of a tensor that is a weight (``weight``) comes
    from the cache."""

    def cast(c: ArgCast, src: torch.Tensor) -> torch.Tensor:
        if c.cacheable and weight(src):
            return from_cache(src, c.to_dtype, caster(c.to_dtype), by_dtype)[0]
        return to_dtype(c, src)

    return cast

"""The autocast state an exception escaping a region in a mode must leave as found (``test_modes.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from reference_impl.dtypes import dtype_name

from .state import autocast_nesting

STATE_FIELDS = ("enabled", "dtype", "cache_enabled", "nesting")


def autocast_state(device: str) -> tuple[bool, str, bool, int]:
    """(enabled, dtype, cache_enabled, nesting depth): what leaves a region as it found it."""
    return (
        bool(torch.is_autocast_enabled(device)),
        dtype_name(torch.get_autocast_dtype(device)),
        bool(torch.is_autocast_cache_enabled()),
        autocast_nesting(),
    )


def state_change(before: tuple[object, ...], after: tuple[object, ...]) -> str:
    """Which fields of :func:`autocast_state` changed ("" when none), e.g. ``nesting changed``."""
    return ", ".join(f"{f} changed" for f, b, a in zip(STATE_FIELDS, before, after, strict=True) if b != a)


@contextlib.contextmanager
def restored_state(device: str) -> Iterator[None]:
    """Put the autocast state back whatever a failing check did (so one failure cannot leak)."""
    before = (
        torch.is_autocast_enabled(device),
        torch.get_autocast_dtype(device),
        torch.is_autocast_cache_enabled(),
    )
    depth = autocast_nesting()
    try:
        yield
    finally:
        torch.set_autocast_enabled(device, before[0])
        torch.set_autocast_dtype(device, before[1])
        torch.set_autocast_cache_enabled(before[2])
        while autocast_nesting() > depth:
            torch.autocast_decrement_nesting()
        while autocast_nesting() < depth:
            torch.autocast_increment_nesting()

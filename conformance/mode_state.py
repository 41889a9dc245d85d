"""The autocast state an exception escaping a region in a mode must leave as found (``test_modes.py``)."""

from __future__ import annotations

import torch

from reference_impl.dtypes import dtype_name
from reference_impl.runtime import autocast_nesting

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

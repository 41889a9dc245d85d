"""Reading the thread's autocast state: the one place the suite asks torch for it."""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields

import torch

from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.state import autocast_nesting


@dataclass(frozen=True)
class AutocastFields:
    """The thread-local state of one device's autocast, as ``rules.context`` names it."""

    enabled: bool
    dtype: str
    cache_enabled: bool
    nesting: int

    def changed(self, after: AutocastFields) -> str:
        """Which fields differ in ``after`` ("" when none), e.g. ``nesting changed``."""
        return ", ".join(
            f"{f.name} changed"
            for f, b, a in zip(fields(self), astuple(self), astuple(after), strict=True)
            if b != a
        )

    def __str__(self) -> str:
        return str(astuple(self))


FIELD_NAMES = tuple(f.name for f in fields(AutocastFields))


def autocast_fields(device: str) -> AutocastFields:
    """The calling thread's autocast state for ``device``."""
    return AutocastFields(
        bool(torch.is_autocast_enabled(device)),
        dtype_name(torch.get_autocast_dtype(device)),
        bool(torch.is_autocast_cache_enabled()),
        autocast_nesting(),
    )

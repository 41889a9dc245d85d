"""Snapshots of the thread's autocast state, to prove that a test leaves it as found."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference_impl.dtypes import dtype_name, dtype_of


def autocast_nesting() -> int:
    """The autocast nesting depth (torch has only increment/decrement; net effect nil)."""
    depth = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return depth


@dataclass(frozen=True)
class AutocastSnapshot:
    per_device: tuple[tuple[str, bool, str], ...]
    cache_enabled: bool
    nesting: int

    def differences(self, other: AutocastSnapshot) -> list[str]:
        out = []
        for (dev, en_a, dt_a), (_, en_b, dt_b) in zip(self.per_device, other.per_device, strict=True):
            if en_a != en_b:
                out.append(f"is_autocast_enabled({dev!r}) {en_a} -> {en_b}")
            if dt_a != dt_b:
                out.append(f"get_autocast_dtype({dev!r}) {dt_a} -> {dt_b}")
        if self.cache_enabled != other.cache_enabled:
            out.append(f"is_autocast_cache_enabled() {self.cache_enabled} -> {other.cache_enabled}")
        if self.nesting != other.nesting:
            out.append(f"autocast nesting depth {self.nesting} -> {other.nesting}")
        return out


def snapshot(devices: tuple[str, ...]) -> AutocastSnapshot:
    per = tuple((d, bool(torch.is_autocast_enabled(d)), str(torch.get_autocast_dtype(d))) for d in devices)
    return AutocastSnapshot(per, bool(torch.is_autocast_cache_enabled()), autocast_nesting())


def restore(s: AutocastSnapshot) -> None:
    """Put the state back after a leak, so that one leaking test does not fail the next."""
    for dev, enabled, dtype in s.per_device:
        torch.set_autocast_enabled(dev, enabled)
        torch.set_autocast_dtype(dev, dtype_of(dtype_name(dtype)))
    torch.set_autocast_cache_enabled(s.cache_enabled)
    depth = autocast_nesting()
    while depth > s.nesting:
        depth = torch.autocast_decrement_nesting()
    while depth < s.nesting:
        depth = torch.autocast_increment_nesting()
    torch.clear_autocast_cache()

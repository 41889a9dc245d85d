"""The thread's autocast state: set directly (``torch.autocast`` refuses absent devices),
snapshot and restored as one; and a block with warnings silenced."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import torch


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence warnings (autocast's "disabled" and dtype warnings, JIT notes) for a block."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def autocast_nesting() -> int:
    """The autocast nesting depth (torch has only increment/decrement; net effect nil)."""
    depth = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return depth


@dataclass(frozen=True)
class AutocastSnapshot:
    """Enabled flag and dtype per device, the cache flag and the nesting depth."""

    per_device: tuple[tuple[str, bool, torch.dtype], ...]
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


def snapshot_autocast(*devices: str) -> AutocastSnapshot:
    per = tuple((d, bool(torch.is_autocast_enabled(d)), torch.get_autocast_dtype(d)) for d in devices)
    return AutocastSnapshot(per, bool(torch.is_autocast_cache_enabled()), autocast_nesting())


def restore_autocast(s: AutocastSnapshot) -> None:
    """Put the state back as ``s`` found it; the cast cache is cleared where autocast ends up off."""
    for dev, enabled, dtype in s.per_device:
        torch.set_autocast_enabled(dev, enabled)
        torch.set_autocast_dtype(dev, dtype)
    torch.set_autocast_cache_enabled(s.cache_enabled)
    depth = autocast_nesting()
    while depth > s.nesting:
        depth = torch.autocast_decrement_nesting()
    while depth < s.nesting:
        depth = torch.autocast_increment_nesting()
    if not any(torch.is_autocast_enabled(dev) for dev, _, _ in s.per_device):
        torch.clear_autocast_cache()


@contextlib.contextmanager
def autocast_state_kept(*devices: str) -> Iterator[AutocastSnapshot]:
    """Whatever the block does to the autocast state of ``devices``, it is put back on exit."""
    before = snapshot_autocast(*devices)
    try:
        yield before
    finally:
        restore_autocast(before)


@contextlib.contextmanager
def raw_autocast(device: str, dtype: torch.dtype, enabled: bool = True) -> Iterator[None]:
    """Set the autocast state directly (``torch.autocast`` refuses absent devices)."""
    with autocast_state_kept(device):
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)
        yield

"""The spec model's building blocks: read-only maps, source locations, tolerances.

Shared by :mod:`autocast_spec.model` (devices, rules, the spec) and
:mod:`autocast_spec.catalog` (the op catalog).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


def frozen_map(d: Mapping[Any, Any] | None = None) -> Mapping[Any, Any]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class SourceLoc:
    """Where a piece of the spec was written: file and 1-based line."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


def cited(d: Mapping[str, Any]) -> str:
    """A declaration's source in words: its public link, or that none exists and where it was seen."""
    source = str(d.get("source", ""))
    if source == "none":
        return f"no public report; seen on torch {d.get('seen_on', '?')}"
    return source

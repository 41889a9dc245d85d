"""Cast tracing: see every cast the reference autocast makes.

::

    with reference_impl.trace_casts() as log, reference_impl.autocast("cpu"):
        loss = model(x).sum()
    print(log)          # a table: op, argument, from -> to, policy, cached

Records come only from op calls the reference autocast handles in this thread;
outside a reference region nothing is recorded. The log is filled as the
program runs and can be read inside or after the ``with`` block.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from .dtypes import dtype_name


@dataclass(frozen=True)
class CastRecord:
    """One cast (or dtype argument) the reference autocast applied to one op call.

    ``arg`` names the schema argument (``weight``, ``tensors[1]``, ``dtype``).
    ``weight``: the argument is a weight-cache candidate (float32 leaf requiring
    grad). ``cached``: the cast was served from the weight-cast cache, so no new
    copy was made.
    """

    op: str
    arg: str
    from_dtype: torch.dtype | None
    to_dtype: torch.dtype
    policy: str
    cached: bool = False
    weight: bool = False


def _short(dtype: torch.dtype | None) -> str:
    return "-" if dtype is None else dtype_name(dtype)


class CastLog:
    """The records of one ``trace_casts()`` block; printing it gives a table."""

    def __init__(self) -> None:
        self.records: list[CastRecord] = []

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[CastRecord]:
        return iter(self.records)

    def __getitem__(self, i: int) -> CastRecord:
        return self.records[i]

    def copies(self) -> list[CastRecord]:
        """The records that made a new tensor (casts not served from the cache)."""
        return [r for r in self.records if not r.cached and r.arg != "dtype"]

    def table(self) -> str:
        """Columns: op, argument, dtypes, policy; cache: ``hit`` (served from the
        weight cache), ``weight`` (a weight cast, cached when the cache is on)."""
        head = ("#", "op", "arg", "from", "to", "policy", "cache")
        rows = [
            (
                str(i),
                r.op,
                r.arg,
                _short(r.from_dtype),
                _short(r.to_dtype),
                r.policy,
                "hit" if r.cached else ("weight" if r.weight else ""),
            )
            for i, r in enumerate(self.records)
        ]
        widths = [max(len(h), *(len(row[c]) for row in rows)) if rows else len(h) for c, h in enumerate(head)]

        def line(cells: tuple[str, ...]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

        out = [line(head), line(tuple("-" * w for w in widths))]
        out.extend(line(r) for r in rows)
        n_cached = sum(r.cached for r in self.records)
        out.append(f"{len(self.records)} casts, {n_cached} from the weight cache")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<CastLog {len(self.records)} records>"


class _Active(threading.local):
    def __init__(self) -> None:
        self.logs: list[CastLog] = []


_ACTIVE = _Active()


def tracing() -> bool:
    """Whether this thread has an open ``trace_casts()`` block."""
    return bool(_ACTIVE.logs)


def emit(record: CastRecord) -> None:
    """Add a record to every open log of this thread (called by the reference kernels)."""
    for log in _ACTIVE.logs:
        log.records.append(record)


@contextlib.contextmanager
def trace_casts() -> Iterator[CastLog]:
    """Record the casts the reference autocast makes in this thread inside the block."""
    log = CastLog()
    _ACTIVE.logs.append(log)
    try:
        yield log
    finally:
        _ACTIVE.logs.remove(log)

"""The cast report: what autocast cast in a traced program, summed up by module and by op.

``CastLog.report()`` (``reference_impl.trace_casts``) gives a :class:`CastReport`;
``str(report)`` is a table, ``report.as_dict()`` / ``report.to_json()`` the same
figures in a stable shape (``version`` 1, documented in docs/reference.md):

.. code-block:: text

    {"version": 1,
     "totals": STATS,
     "cache": {"stored": int, "stored_bytes": int, "hits": int},
     "by_module": [{"module": str | null, **STATS}, ...],      # order of first cast
     "by_op": [{"op": str, "policy": str, **STATS,
                "args": [{"arg": str, "kind": str, **STATS}, ...]}, ...]}

    STATS = {"casts": int, "cache_hits": int, "bytes": int, "dtype_args": int,
             "kinds": {"input": int, "weight": int, "activation": int},
             "conversions": {"float32->bfloat16": int, ...}}

``casts``: copies made; ``cache_hits``: casts served from the weight cache (no
copy); ``bytes``: the size of the copies; ``dtype_args``: dtype arguments set or
appended; ``kinds``: how many tensor arguments of each kind were cast (copies
and hits); ``conversions``: the same by source and target dtype.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..engine.dtypes import dtype_name

INPUT, WEIGHT, ACTIVATION = "input", "weight", "activation"


@dataclass(frozen=True)
class CastRecord:
    """One cast (or dtype argument) the reference autocast applied to one op call.

    ``arg`` names the schema argument (``weight``, ``tensors[1]``, ``dtype``).
    ``weight``: the argument is a weight-cache candidate (float32 leaf requiring
    grad). ``cached``: the cast was served from the weight-cast cache, so no new
    copy was made; ``stored``: the copy made was stored in the cache.
    ``kind``: what was cast: ``weight`` (an ``nn.Parameter``), ``activation`` (a
    tensor autograd computed: it has a ``grad_fn``) or ``input`` (any other tensor:
    data, buffers, and, under ``torch.no_grad()``, intermediate results too); empty
    for a dtype argument. ``module``: the qualified name of the innermost module
    running (``""``: the traced model itself; None: outside it or no model given).
    ``nbytes``: the size of the copy made (0 when served from the cache).
    """

    op: str
    arg: str
    from_dtype: torch.dtype | None
    to_dtype: torch.dtype
    policy: str
    cached: bool = False
    weight: bool = False
    kind: str = ""
    module: str | None = None
    nbytes: int = 0
    stored: bool = False


VERSION = 1
KINDS = (INPUT, WEIGHT, ACTIVATION)


def _dtype(d: Any) -> str:
    return "-" if d is None else dtype_name(d)


@dataclass
class Stats:
    """The figures of one group of records (see the module docstring)."""

    casts: int = 0
    cache_hits: int = 0
    bytes: int = 0
    dtype_args: int = 0
    kinds: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    conversions: dict[str, int] = field(default_factory=dict)

    def add(self, r: CastRecord) -> None:
        if not r.kind:  # a dtype argument, no tensor cast
            self.dtype_args += 1
            return
        if r.cached:
            self.cache_hits += 1
        else:
            self.casts += 1
            self.bytes += r.nbytes
        self.kinds[r.kind] = self.kinds.get(r.kind, 0) + 1
        conv = f"{_dtype(r.from_dtype)}->{_dtype(r.to_dtype)}"
        self.conversions[conv] = self.conversions.get(conv, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "casts": self.casts,
            "cache_hits": self.cache_hits,
            "bytes": self.bytes,
            "dtype_args": self.dtype_args,
            "kinds": dict(self.kinds),
            "conversions": dict(self.conversions),
        }


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MiB"


def _columns(head: tuple[str, ...], rows: list[tuple[str, ...]], right_from: int) -> list[str]:
    """Aligned text columns; columns from ``right_from`` on are right-aligned (numbers)."""
    widths = [max(len(h), *(len(r[c]) for r in rows)) if rows else len(h) for c, h in enumerate(head)]

    def line(cells: tuple[str, ...]) -> str:
        out = [
            c.rjust(w) if i >= right_from else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(head), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)]


def _numbers(s: Stats) -> tuple[str, ...]:
    return (
        str(s.casts),
        str(s.cache_hits),
        _size(s.bytes),
        *(str(s.kinds.get(k, 0)) for k in KINDS),
    )


_NUMBER_HEAD = ("casts", "hits", "bytes", *KINDS)


class CastReport:
    """The records of a ``trace_casts`` block grouped by module and by op."""

    def __init__(self, records: Sequence[CastRecord]) -> None:
        self.records = list(records)
        self.totals = Stats()
        self.modules: dict[str | None, Stats] = {}
        self.ops: dict[str, tuple[str, Stats]] = {}  # op -> (policy, stats)
        self.args: dict[tuple[str, str, str], Stats] = {}  # (op, arg, kind) -> stats
        self.stored = self.stored_bytes = 0
        for r in self.records:
            self.totals.add(r)
            self.modules.setdefault(r.module, Stats()).add(r)
            self.ops.setdefault(r.op, (r.policy, Stats()))[1].add(r)
            self.args.setdefault((r.op, r.arg, r.kind), Stats()).add(r)
            if r.stored:
                self.stored += 1
                self.stored_bytes += r.nbytes

    def as_dict(self) -> dict[str, Any]:
        """The report in its JSON shape (``version`` 1, see the module docstring)."""
        return {
            "version": VERSION,
            "totals": self.totals.as_dict(),
            "cache": {
                "stored": self.stored,
                "stored_bytes": self.stored_bytes,
                "hits": self.totals.cache_hits,
            },
            "by_module": [{"module": m, **s.as_dict()} for m, s in self.modules.items()],
            "by_op": [
                {
                    "op": op,
                    "policy": policy,
                    **s.as_dict(),
                    "args": [
                        {"arg": arg, "kind": kind, **a.as_dict()}
                        for (o, arg, kind), a in self.args.items()
                        if o == op
                    ],
                }
                for op, (policy, s) in self.ops.items()
            ],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent)

    def summary(self) -> list[str]:
        """Two or three sentences: what was cast, how much, what the cache held."""
        t = self.totals
        kinds = ", ".join(f"{t.kinds.get(k, 0)} {k}s" for k in KINDS)
        convs = ", ".join(f"{c}: {n}" for c, n in t.conversions.items()) or "none"
        lines = [
            f"{t.casts} casts made ({_size(t.bytes)} converted), {t.cache_hits} served from the weight cache",
            f"cast arguments: {kinds}; conversions: {convs}",
            f"weight cache: {self.stored} copies stored ({_size(self.stored_bytes)}), "
            f"reused {t.cache_hits} times; cleared when the outermost region exits",
        ]
        if t.dtype_args:
            lines.append(f"dtype arguments set or appended: {t.dtype_args}")
        return lines

    def module_table(self) -> list[str]:
        rows = [
            ("(outside the model)" if m is None else m or "(model)", *_numbers(s))
            for m, s in self.modules.items()
        ]
        return _columns(("module", *_NUMBER_HEAD), rows, 1)

    def op_table(self) -> list[str]:
        rows = []
        for op, (policy, _) in self.ops.items():
            for (o, arg, kind), a in self.args.items():
                if o == op:
                    rows.append((op, policy, arg, kind or "dtype", *_numbers(a)[:3]))
        return _columns(("op", "policy", "arg", "kind", "casts", "hits", "bytes"), rows, 4)

    def table(self) -> str:
        return "\n".join(
            [
                *self.summary(),
                "",
                "by module:",
                *self.module_table(),
                "",
                "by op and argument:",
                *self.op_table(),
            ]
        )

    def __str__(self) -> str:
        return self.table()

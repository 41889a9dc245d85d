"""Cast tracing: see every cast the reference autocast makes, and where in a model.

::

    with reference_impl.trace_casts(model) as log, reference_impl.autocast("cpu"):
        loss = model(x).sum()
    print(log)            # one row per cast: op, argument, from -> to, policy, cache
    print(log.report())   # grouped by module and by op: casts, bytes, cache hits, what was cast

Records come only from op calls the reference autocast handles in this thread;
outside a reference region nothing is recorded. The log is filled as the
program runs and can be read inside or after the ``with`` block. With a model,
each record names the innermost module whose ``forward`` was running (forward
pre-hooks and hooks on every submodule, removed when the block ends).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import nn

from ..engine.dtypes import dtype_name
from ..engine.policy import ArgCast
from . import fast_kernels
from .cast_report import ACTIVATION, INPUT, WEIGHT, CastRecord, CastReport


def kind_of(t: torch.Tensor) -> str:
    """``weight``, ``activation`` or ``input`` (see :class:`CastRecord`)."""
    if isinstance(t, nn.Parameter):
        return WEIGHT
    return ACTIVATION if t.grad_fn is not None else INPUT


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

    def report(self) -> CastReport:
        """The records summed up by module and by op (a table, or JSON)."""
        return CastReport(self.records)

    def table(self) -> str:
        """Columns: op, argument, kind, module, dtypes, policy; cache: ``hit`` (served from
        the weight cache), ``stored`` (a weight cast kept for reuse), ``weight`` (a weight
        cast made with the cache off)."""
        head = ("#", "op", "arg", "kind", "module", "from", "to", "policy", "cache")
        rows = [
            (
                str(i),
                r.op,
                r.arg,
                r.kind,
                "" if r.module is None else r.module or "(model)",
                _short(r.from_dtype),
                _short(r.to_dtype),
                r.policy,
                "hit" if r.cached else "stored" if r.stored else "weight" if r.weight else "",
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
        self.modules: list[str] = []  # the module stack of traced models, innermost last


_ACTIVE = _Active()


def tracing() -> bool:
    """Whether this thread has an open ``trace_casts()`` block."""
    return bool(_ACTIVE.logs)


def emit(record: CastRecord) -> None:
    """Add a record to every open log of this thread (called by the reference kernels)."""
    for log in _ACTIVE.logs:
        log.records.append(record)


def cast_record(
    op: str,
    arg: str,
    c: ArgCast,
    src: torch.Tensor,
    new: torch.Tensor,
    policy: str,
    weight: bool,
    hit: bool,
    stored: bool,
) -> CastRecord:
    """The record of one cast the reference made (``new``: the tensor passed on; ``weight``:
    ``src`` is a weight-cache candidate)."""
    modules = _ACTIVE.modules
    return CastRecord(
        op,
        arg,
        c.from_dtype,
        c.to_dtype,
        policy,
        cached=hit,
        weight=weight,
        kind=kind_of(src),
        module=modules[-1] if modules else None,
        nbytes=0 if hit else new.numel() * new.element_size(),
        stored=stored,
    )


@contextlib.contextmanager
def _module_names(model: nn.Module) -> Iterator[None]:
    """While open, ``_ACTIVE.modules[-1]`` names the innermost submodule of ``model`` running."""
    stack = _ACTIVE.modules
    depth = len(stack)
    handles = []

    def enter(name: str) -> None:
        stack.append(name)

    def leave(name: str) -> None:
        if stack and stack[-1] == name:
            stack.pop()

    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(lambda *_, n=name: enter(n)))
        handles.append(module.register_forward_hook(lambda *_, n=name: leave(n), always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        del stack[depth:]


@contextlib.contextmanager
def trace_casts(model: nn.Module | None = None) -> Iterator[CastLog]:
    """Record the casts the reference autocast makes in this thread inside the block;
    with ``model``, each record names the submodule that made it."""
    log = CastLog()
    _ACTIVE.logs.append(log)
    _tell_kernels()
    try:
        with _module_names(model) if model is not None else contextlib.nullcontext():
            yield log
    finally:
        _ACTIVE.logs.remove(log)
        _tell_kernels()


def _tell_kernels() -> None:
    """The C++ kernels, once loaded, leave every call of a tracing thread to Python (which
    records); a thread's first region tells them too (``reference_dispatch``)."""
    ext = fast_kernels.loaded()
    if ext is not None:
        ext.set_tracing(tracing())

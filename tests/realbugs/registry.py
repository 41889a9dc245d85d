"""The registries of the real-bug corpus: the replays that inject a reported bug into the
installed torch, the witnesses whose observable result shows it, and what witnesses share.

A replay is installed once per process (the suite subprocess, through ``realbugs.plugin``,
or the witness subprocess) and stays for the rest of it. Kernel replays register wrong
Autocast kernels with ``torch.library`` (helpers from ``mutation.kernels``); the others
monkeypatch the Python layer (``torch.autocast``, ``torch.amp.custom_fwd`` / ``custom_bwd``,
``torch.utils.checkpoint``, ``torch.compile``, ``threading``). Each replay's docstring says
what the report showed. A witness returns something JSON-able; an error is returned as
``"error: <Type>: <message>"`` (first line, shortened), so it is an observation too.

The replays and witnesses live by kind of bug: :data:`KINDS`, one module each.
``python -m realbugs.show ID`` runs an entry's witness before and after its replay.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.state import raw_autocast

KINDS = ("op_lists", "cache", "context", "autograd", "compiled")
AUTOCAST = torch.amp.autocast_mode.autocast
REPLAYS: dict[str, Callable[[], None]] = {}
WITNESSES: dict[str, Callable[[], Any]] = {}


def replay(fn: Callable[[], None]) -> Callable[[], None]:
    REPLAYS[fn.__name__] = fn
    return fn


def witness(fn: Callable[[], Any]) -> Callable[[], Any]:
    WITNESSES[fn.__name__] = fn
    return fn


def registered() -> tuple[dict[str, Callable[[], None]], dict[str, Callable[[], Any]]]:
    """Every replay and witness, the kind modules imported (they register themselves)."""
    for kind in KINDS:
        importlib.import_module(f"realbugs.{kind}")
    return REPLAYS, WITNESSES


def observe(fn: Callable[[], Any]) -> Any:
    """``fn()``, or the error it raised as a string."""
    try:
        return fn()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"


def name(dtype: Any) -> str:
    return dtype_name(dtype)


@contextmanager
def fake_cuda_autocast(dtype: torch.dtype = torch.float16) -> Iterator[None]:
    """CUDA autocast on FakeTensors (no GPU): the thread-local state set directly."""
    with FakeTensorMode(), raw_autocast("cuda", dtype):
        yield


def cpu_autocast(dtype: torch.dtype = torch.bfloat16, **kw: Any) -> torch.autocast:
    return torch.autocast("cpu", dtype=dtype, **kw)


class OpLog(TorchDispatchMode):
    """The aten ops that ran below Autocast, and weak references to the casts' outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.casts: list[weakref.ref[torch.Tensor]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.ops.append(func.__name__)
        if func.__name__.startswith("_to_copy"):
            self.casts.append(weakref.ref(out))
        return out

"""Context, thread and cache mutants: ``torch.autocast``, ``threading.Thread`` or the
weight-cast cache monkeypatched (the sentinel op's kernel replaced by one with a wrong cache)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch

from .. import kernels as K
from .mutant import CPU, Mutant, context_mutant, op_keyword

AUTOCAST = torch.amp.autocast_mode.autocast


def _patch(owner: Any, name: str, make: Callable[[Any], Any]) -> Callable[[], None]:
    """An install function replacing ``owner.name`` with ``make(original)``."""

    def install() -> None:
        setattr(owner, name, make(getattr(owner, name)))

    return install


def _exit_keeps_state_on_exception(orig: Any) -> Any:
    def __exit__(self: Any, exc_type: Any, exc: Any, tb: Any) -> Any:
        if exc_type is not None:
            torch.autocast_decrement_nesting()
            return False
        return orig(self, exc_type, exc, tb)

    return __exit__


def _inner_exit_enables(orig: Any) -> Any:
    def __exit__(self: Any, exc_type: Any, exc: Any, tb: Any) -> Any:
        result = orig(self, exc_type, exc, tb)
        depth = torch.autocast_increment_nesting() - 1
        torch.autocast_decrement_nesting()
        if depth > 0:
            torch.set_autocast_enabled(self.device, True)
        return result

    return __exit__


def _init_with(**forced: Any) -> Callable[[Any], Any]:
    def make(orig: Any) -> Any:
        def __init__(self: Any, device_type: str, dtype: Any = None, enabled: bool = True, **kw: Any) -> None:
            args = {"dtype": dtype, "enabled": enabled, **kw, **forced}
            orig(self, device_type, **args)

        return __init__

    return make


def _init_silent(orig: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            orig(self, *args, **kwargs)

    return __init__


def _threads_inherit_state() -> None:
    start, run = threading.Thread.start, threading.Thread.run

    def patched_start(self: threading.Thread) -> None:
        self._autocast_state = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))  # type: ignore[attr-defined]
        start(self)

    def patched_run(self: threading.Thread) -> None:
        state = getattr(self, "_autocast_state", None)
        if state is not None:
            torch.set_autocast_enabled("cpu", state[0])
            torch.set_autocast_dtype("cpu", state[1])
        run(self)

    threading.Thread.start = patched_start  # type: ignore[method-assign]
    threading.Thread.run = patched_run  # type: ignore[method-assign]


def _threads_inherit_cache_flag() -> None:
    start, run = threading.Thread.start, threading.Thread.run

    def patched_start(self: threading.Thread) -> None:
        depth = torch.autocast_increment_nesting() - 1
        torch.autocast_decrement_nesting()
        self._autocast_cache = (torch.is_autocast_cache_enabled(), depth)  # type: ignore[attr-defined]
        start(self)

    def patched_run(self: threading.Thread) -> None:
        state = getattr(self, "_autocast_cache", None)
        if state is not None:
            torch.set_autocast_cache_enabled(state[0])
            for _ in range(state[1]):
                torch.autocast_increment_nesting()
        run(self)

    threading.Thread.start = patched_start  # type: ignore[method-assign]
    threading.Thread.run = patched_run  # type: ignore[method-assign]


def _never_clear_cache() -> None:
    torch.clear_autocast_cache = lambda: None


def _caching(keep: Callable[[torch.Tensor], bool]) -> Callable[[], None]:
    def install() -> None:
        K.caching_kernel(K.cpu_sentinel_op(), "cpu", keep)

    return install


def _float32(t: torch.Tensor) -> bool:
    return t.dtype == torch.float32


CONTEXT_MUTANTS = [
    context_mutant(
        "exception-keeps-state",
        "context",
        "an exception escaping torch.autocast leaves autocast enabled with the region's dtype",
        ("test_context.py",),
        _patch(AUTOCAST, "__exit__", _exit_keeps_state_on_exception),
    ),
    context_mutant(
        "inner-exit-enables",
        "context",
        "leaving a nested region re-enables autocast instead of restoring the outer state",
        ("test_context.py",),
        _patch(AUTOCAST, "__exit__", _inner_exit_enables),
    ),
    context_mutant(
        "decorator-ignored",
        "context",
        "@torch.autocast(...) returns the function undecorated",
        ("test_context.py",),
        _patch(AUTOCAST, "__call__", lambda orig: lambda self, func: func),
    ),
    context_mutant(
        "thread-inherits-state",
        "threads",
        "a new thread starts with its parent's autocast state",
        ("test_threads.py",),
        _threads_inherit_state,
    ),
    context_mutant(
        "thread-inherits-cache-flag",
        "threads",
        "a new thread starts with its parent's cache flag and nesting depth (enabled and dtype are fresh)",
        ("test_threads.py",),
        _threads_inherit_cache_flag,
    ),
    context_mutant(
        "dtype-argument-ignored",
        "context",
        "torch.autocast(dtype=...) is ignored: the device's default dtype is used",
        ("test_context.py", "test_hypothesis.py"),
        _patch(AUTOCAST, "__init__", _init_with(dtype=None)),
        options=(*CPU, "--dtype", "float16"),
    ),
    context_mutant(
        "unsupported-dtype-silent",
        "context",
        "an unsupported autocast dtype disables autocast without the warning",
        ("test_context.py",),
        _patch(AUTOCAST, "__init__", _init_silent),
    ),
    context_mutant(
        "cache-never-cleared",
        "cache",
        "the weight-cast cache is never cleared (torch.clear_autocast_cache does nothing)",
        ("test_cache.py",),
        _never_clear_cache,
    ),
    context_mutant(
        "cache-enabled-forced",
        "cache",
        "cache_enabled=False is ignored",
        ("test_cache.py",),
        _patch(AUTOCAST, "__init__", _init_with(cache_enabled=True)),
    ),
    context_mutant(
        "cache-keeps-non-leaf",
        "cache",
        "the cache keeps float32 tensors that require grad even when they are not leaves",
        ("test_cache.py",),
        _caching(lambda t: _float32(t) and t.requires_grad),
    ),
    context_mutant(
        "cache-keeps-non-grad",
        "cache",
        "the cache keeps float32 tensors that do not require grad",
        ("test_cache.py",),
        _caching(lambda t: _float32(t) and t.is_leaf),
    ),
    Mutant(
        "cache-bug-in-one-kernel",
        "cache",
        "aten::bmm's Autocast kernel (not the sentinel op's) caches non-leaf float32 tensors needing grad",
        CPU,
        ("test_cache.py",),
        op_keyword("aten::bmm"),
        lambda: K.caching_kernel("aten::bmm", "cpu", lambda t: _float32(t) and t.requires_grad),
        (("cpu", "aten::bmm", "lower_precision_fp"),),
    ),
    context_mutant(
        "cache-keeps-nothing",
        "cache",
        "weights are cast again at every call (nothing is cached)",
        ("test_cache.py",),
        _caching(lambda t: False),
    ),
]

"""Bugs of the weight-cast cache: what is cached, for which dtype, and who clears it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import torch
from mutation import kernels as K

from .registry import OpLog, cpu_autocast, name, observe, replay, witness

# --- replays ------------------------------------------------------------


def _caching_kernel(ops: set[str], store: Callable[[], dict[int, tuple[torch.Tensor, torch.Tensor]]]) -> None:
    """Lower-precision casts with a weight cache like the native one (float32 leaves that
    require grad, not under inference_mode, only while cache_enabled), kept in ``store()``
    and cast in the ambient grad mode; ``torch.clear_autocast_cache`` clears ``store()``."""
    clear = torch.clear_autocast_cache

    def clear_both() -> None:
        store().clear()
        clear()

    torch.clear_autocast_cache = clear_both
    for op in ops:
        target = K.op_overload(op)

        def kernel(*args: Any, _target: Any = target, **kwargs: Any) -> Any:
            lower = torch.get_autocast_dtype("cpu")

            def cast(t: torch.Tensor) -> torch.Tensor:
                if not K.floating_on("cpu", t) or t.dtype == lower:
                    return t
                cacheable = (
                    torch.is_autocast_cache_enabled()
                    and t.dtype == torch.float32
                    and t.is_leaf
                    and t.requires_grad
                    and not torch.is_inference_mode_enabled()
                )
                if not cacheable:
                    return t.to(lower)
                hit = store().get(id(t))
                if hit is None or hit[0] is not t:
                    hit = store()[id(t)] = (t, t.to(lower))
                return hit[1]

            with K.below_autocast("cpu"):
                return _target(*K.map_tensors(args, cast), **K.map_tensors(kwargs, cast))

        K.register(op, kernel, "cpu")


def _cache_ops() -> set[str]:
    return {"aten::mm", K.cpu_sentinel_op()}


@replay
def cache_keeps_no_grad_casts() -> None:
    """A cast cached under no_grad (no autograd history) is reused after grad is re-enabled
    in the same region: the later forward's weights get no gradient."""
    cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    _caching_kernel(_cache_ops(), lambda: cache)


@replay
def cache_thread_local_clear() -> None:
    """The cache is per thread: torch.clear_autocast_cache() clears only the calling
    thread's, so casts cached by other threads (autograd's) are never freed."""
    local = threading.local()

    def store() -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        if not hasattr(local, "cache"):
            local.cache = {}
        return local.cache  # type: ignore[no-any-return]

    _caching_kernel(_cache_ops(), store)


# --- witnesses ----------------------------------------------------------


@witness
def grad_after_no_grad_forward() -> Any:
    x, w = torch.randn(2, 4), torch.randn(4, 4, requires_grad=True)

    def run() -> bool:
        with cpu_autocast():
            with torch.no_grad():
                torch.mm(x, w)
            y = torch.mm(x, w)
        y.float().sum().backward()
        return w.grad is not None

    return observe(run)


@witness
def cross_thread_cache_freed() -> Any:
    x, w = torch.randn(2, 4), torch.randn(4, 4, requires_grad=True)
    log, cast_done, checked = OpLog(), threading.Event(), threading.Event()

    def worker() -> None:  # like autograd's long-lived threads: autocast on, no region exit
        torch.set_autocast_enabled("cpu", True)
        with log:
            torch.mm(x, w)
        torch.set_autocast_enabled("cpu", False)
        cast_done.set()
        checked.wait(60)

    t = threading.Thread(target=worker)
    t.start()
    cast_done.wait(60)
    torch.clear_autocast_cache()
    gc.collect()
    alive = [ref() is not None for ref in log.casts]
    checked.set()
    t.join()
    return alive


@witness
def nested_dtype_switch() -> Any:
    lin, x = torch.nn.Linear(4, 4), torch.randn(2, 4)
    with cpu_autocast():
        lin(x)
        with cpu_autocast(torch.float16):
            return observe(lambda: name(lin(x).dtype))

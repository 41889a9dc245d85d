"""Bugs of the context state: getters, unsupported dtypes, the any-enabled query, threads."""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from .registry import AUTOCAST, cpu_autocast, name, observe, replay, witness

# --- replays ------------------------------------------------------------


class _FreshDtype:
    """A new object per call that prints like the dtype but is not it (``==`` is identity)."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __repr__(self) -> str:
        return repr(self.dtype)


@replay
def dtype_getter_returns_new_object() -> None:
    """get_autocast_*_dtype() built a new dtype object per call: ``== torch.bfloat16`` is False."""
    get, set_ = torch.get_autocast_dtype, torch.set_autocast_dtype

    def unwrap(d: Any) -> Any:
        return d.dtype if isinstance(d, _FreshDtype) else d

    torch.get_autocast_dtype = lambda device_type: _FreshDtype(get(device_type))  # type: ignore[assignment,return-value]
    torch.get_autocast_cpu_dtype = lambda: _FreshDtype(get("cpu"))  # type: ignore[assignment,return-value]
    torch.set_autocast_dtype = lambda device_type, dtype: set_(device_type, unwrap(dtype))  # type: ignore[assignment]


def _cpu_unsupported(self: Any) -> bool:
    return self.device == "cpu" and self.fast_dtype not in (torch.bfloat16, torch.float16)


@replay
def unsupported_dtype_raises_on_enter() -> None:
    """CPU autocast warned 'Disabling autocast' for an unsupported dtype, then raised on entry."""
    enter = AUTOCAST.__enter__

    def __enter__(self: Any) -> Any:
        if _cpu_unsupported(self):
            raise RuntimeError("Currently, AutocastCPU only support Bfloat16 as the autocast_cpu_dtype")
        return enter(self)

    AUTOCAST.__enter__ = __enter__  # type: ignore[method-assign]


@contextmanager
def _rewritten_warnings(rewrite: Callable[[str], str]) -> Iterator[None]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield
    for w in seen:
        warnings.warn_explicit(rewrite(str(w.message)), w.category, w.filename, w.lineno)


@replay
def unsupported_dtype_message_wrong() -> None:
    """MPS's unsupported-dtype warning named the wrong supported dtype (bfloat16 instead of float16)."""
    init = AUTOCAST.__init__
    wrong = "Autocast only supports dtype of torch.bfloat16 currently."

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        with _rewritten_warnings(lambda m: re.sub(r"Autocast only supports .*currently\.", wrong, m)):
            init(self, *args, **kwargs)

    AUTOCAST.__init__ = __init__  # type: ignore[method-assign]


@replay
def unsupported_dtype_warns_when_disabled() -> None:
    """autocast(enabled=False) with an unsupported dtype still warned 'Disabling autocast'."""
    init = AUTOCAST.__init__

    def __init__(self: Any, device_type: str, dtype: Any = None, enabled: bool = True, **kw: Any) -> None:
        init(self, device_type, dtype=dtype, enabled=enabled, **kw)
        if not enabled and _cpu_unsupported(self):
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                stacklevel=2,
            )

    AUTOCAST.__init__ = __init__  # type: ignore[method-assign]


@replay
def device_object_misleading_error() -> None:
    """torch.autocast given a torch.device (not its type string) raised a RuntimeError calling the
    supported device unsupported ("User specified an unsupported autocast device_type 'cpu'")."""
    init = AUTOCAST.__init__

    def __init__(self: Any, device_type: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(device_type, torch.device):
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        init(self, device_type, *args, **kwargs)

    AUTOCAST.__init__ = __init__  # type: ignore[method-assign]


@replay
def any_enabled_ignores_device() -> None:
    """is_any_autocast_enabled() left one device (PrivateUse1) out: False inside its region."""
    devices = ("cuda", "xpu", "hpu", "mps", "mtia", "maia")
    torch._C._is_any_autocast_enabled = lambda: any(  # type: ignore[assignment]
        torch.is_autocast_enabled(d) for d in devices if torch.amp.is_autocast_available(d)
    )


@replay
def new_threads_get_other_dtype() -> None:
    """The backend set its default autocast dtype only in the importing thread; other
    threads start with another one (float16 where the device default is bfloat16)."""
    run = threading.Thread.run

    def patched_run(self: threading.Thread) -> None:
        torch.set_autocast_dtype("cpu", torch.float16)
        run(self)

    threading.Thread.run = patched_run  # type: ignore[method-assign]


# --- witnesses ----------------------------------------------------------


@witness
def dtype_getter_equality() -> Any:
    with cpu_autocast():
        return [
            torch.get_autocast_dtype("cpu") == torch.bfloat16,
            torch.get_autocast_cpu_dtype() == torch.bfloat16,
        ]


def _warnings_of(make: Callable[[], torch.autocast]) -> Any:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")

        def enter() -> bool:
            with make():
                return torch.is_autocast_enabled("cpu")

        result = observe(enter)
    return {"enabled": result, "warnings": [str(w.message) for w in seen]}


@witness
def unsupported_dtype_region() -> Any:
    return _warnings_of(lambda: cpu_autocast(torch.float64))


@witness
def unsupported_dtype_disabled_region() -> Any:
    return _warnings_of(lambda: cpu_autocast(torch.float64, enabled=False))


@witness
def device_object_region() -> Any:
    return observe(lambda: torch.autocast(torch.device("cpu"), dtype=torch.bfloat16))


@witness
def any_autocast_enabled_in_region() -> Any:
    with cpu_autocast():
        return torch._C._is_any_autocast_enabled()


@witness
def no_argument_query_in_region() -> Any:
    with cpu_autocast():
        return torch.is_autocast_enabled()


@witness
def new_thread_dtype() -> Any:
    seen: list[str] = []
    t = threading.Thread(target=lambda: seen.append(name(torch.get_autocast_dtype("cpu"))))
    t.start()
    t.join()
    return seen

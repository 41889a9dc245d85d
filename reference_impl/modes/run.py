"""One op call run eagerly, through TorchScript, a trace, torch.compile, torch.export or an
AOTInductor package: the execution modes (:class:`Mode`, the suite's ``--mode``).

:func:`run_in_mode` wraps a single op call (an aten op name such as ``aten::mm`` or a
public entry point such as ``torch.mm``, ``Tensor.mm`` or ``torch.nn.functional.linear``)
in a small function that enables autocast around it, and runs that function in the mode.
Compiled functions are cached by (mode, target, argument structure, constants, device,
dtype, backend), so a test that calls the same op twice compiles once.
"""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import itertools
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..engine.dtypes import dtype_name
from ..harness.samples import is_operator, resolve
from .aoti_packages import built_or_reused


class Mode(enum.Enum):
    """How a call runs."""

    EAGER = "eager"
    SCRIPT = "script"  # torch.jit.script
    TRACE = "trace"  # torch.jit.trace
    COMPILE = "compile"  # torch.compile, with a backend (aot_eager, inductor, a vendor's)
    EXPORT = "export"  # torch.export, strict and non-strict: ep.module(), run_decompositions()
    AOTI = "aoti"  # torch.export, then AOTInductor: a package compiled ahead of time, loaded back


MODES: tuple[str, ...] = tuple(m.value for m in Mode)
DEFAULT_COMPILE_BACKEND = "aot_eager"

# ---------------------------------------------------------------------------
# One op call, split into tensor inputs and constants
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """A tensor parameter (``index``) or a list of tensor parameters."""

    indices: tuple[int, ...]
    is_list: bool


def split(value: Any, tensors: list[torch.Tensor]) -> Any:
    """Replace tensors (and lists of tensors) by slots; keep constants."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return Slot((len(tensors) - 1,), False)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        start = len(tensors)
        tensors.extend(value)
        return Slot(tuple(range(start, len(tensors))), True)
    return value


def rebuild(value: Any, tensors: Sequence[torch.Tensor]) -> Any:
    if isinstance(value, Slot):
        return [tensors[i] for i in value.indices] if value.is_list else tensors[value.indices[0]]
    return value


def _constant_key(value: Any) -> Any:
    if isinstance(value, Slot):
        return ("slot", value.indices, value.is_list)
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_constant_key(v) for v in value))
    return ("const", repr(value))


# ---------------------------------------------------------------------------
# Building the per-mode callables (cached)
# ---------------------------------------------------------------------------

_CACHE: dict[tuple[Any, ...], Callable[..., Any]] = {}
_SCRIPT_DIR: list[Path] = []
_counter = itertools.count()


def _autocast(device: str, dtype: torch.dtype) -> contextlib.AbstractContextManager[Any]:
    return torch.autocast(device_type=device, dtype=dtype)


def _python_fn(
    target: str, args: Sequence[Any], kwargs: Mapping[str, Any], device: str, dtype: torch.dtype
) -> Callable[..., Any]:
    fn = resolve(target)

    def call(*tensors: torch.Tensor) -> Any:
        with _autocast(device, dtype):
            return fn(
                *(rebuild(a, tensors) for a in args), **{k: rebuild(v, tensors) for k, v in kwargs.items()}
            )

    return call


class Region(torch.nn.Module):
    """A module whose forward is ``fn`` (what ``torch.export`` exports)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *tensors: torch.Tensor) -> Any:
        return self.fn(*tensors)


def _literal(value: Any) -> str:
    """A TorchScript source literal for a constant argument."""
    if isinstance(value, Slot):
        names = [f"t{i}" for i in value.indices]
        return f"[{', '.join(names)}]" if value.is_list else names[0]
    if isinstance(value, torch.dtype):
        return f"torch.{dtype_name(value)}"
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return repr(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return f"float({str(value)!r})"
        return repr(value)
    if isinstance(value, (list, tuple)):
        return f"[{', '.join(_literal(v) for v in value)}]"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as a TorchScript literal")


def call_text(target: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """One op call as source text, its tensors named ``t<index>`` (their :class:`Slot` indices)."""
    rendered = [_literal(a) for a in args] + [f"{k}={_literal(v)}" for k, v in kwargs.items()]
    if is_operator(target):
        ns, rest = target.split("::", 1)
        callee = f"torch.ops.{ns}.{rest.split('.')[0]}"
    elif target.startswith("Tensor."):
        callee = f"{rendered.pop(0)}.{target.split('.', 1)[1]}"
    else:
        callee = target
    return f"{callee}({', '.join(rendered)})"


def region_source(body: Sequence[str], result: str, n_tensors: int, device: str, dtype: torch.dtype) -> str:
    """A module defining ``fn(t0, t1, ...)``: ``body`` (statements) inside ``torch.autocast``,
    then ``return <result>``."""
    params = ", ".join(f"t{i}: torch.Tensor" for i in range(n_tensors))
    lines = "".join(f"        {line}\n" for line in body)
    return (
        "import torch\n\n\n"
        f"def fn({params}):\n"
        f"    with torch.autocast(device_type={device!r}, dtype=torch.{dtype_name(dtype)}):\n"
        f"{lines}"
        f"    return {result}\n"
    )


def script_source(
    target: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    n_tensors: int,
    device: str,
    dtype: torch.dtype,
) -> str:
    """The source of the scripted function: one op call inside ``torch.autocast``."""
    params = ", ".join(f"t{i}: torch.Tensor" for i in range(n_tensors))
    return (
        "import torch\n\n\n"
        f"def fn({params}):\n"
        f"    with torch.autocast(device_type={device!r}, dtype=torch.{dtype_name(dtype)}):\n"
        f"        return {call_text(target, args, kwargs)}\n"
    )


def module_fn(source: str) -> Callable[..., Any]:
    """Write ``source`` to a module file (TorchScript reads source from files); return its ``fn``."""
    if not _SCRIPT_DIR:
        _SCRIPT_DIR.append(Path(tempfile.mkdtemp(prefix="autocast_modes_")))
    name = f"_autocast_mode_fn_{next(_counter)}"
    path = _SCRIPT_DIR[0] / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.fn


def _build(
    mode: Mode,
    target: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    tensors: Sequence[torch.Tensor],
    device: str,
    dtype: torch.dtype,
    backend: str,
) -> Callable[..., Any]:
    if mode in (Mode.SCRIPT, Mode.COMPILE):
        # a generated module per call: TorchScript needs source, and Dynamo caches per code
        # object (shared closures would hit its recompile limit and silently run eagerly)
        fn = module_fn(script_source(target, args, kwargs, len(tensors), device, dtype))
        if mode is Mode.SCRIPT:
            return torch.jit.script(fn)
        return torch.compile(fn, backend=backend, dynamic=False, fullgraph=True)
    py = _python_fn(target, args, kwargs, device, dtype)
    if mode is Mode.EAGER:
        return py
    if mode is Mode.EXPORT:  # non-strict (strict: the modes category's batches); run: ep.module()
        return torch.export.export(Region(py), tuple(tensors), strict=False).module()
    if mode is Mode.AOTI:
        return aoti_compiled(py, tensors)
    return torch.jit.trace(py, tuple(tensors), check_trace=False)


def aoti_compiled(fn: Callable[..., Any], tensors: Sequence[torch.Tensor]) -> Callable[..., Any]:
    """``fn`` exported (non-strict) and compiled by AOTInductor into a package in the run's
    inductor cache directory (``TORCHINDUCTOR_CACHE_DIR``), loaded back: built once, reused by a
    later run with the same cache (:mod:`.aoti_packages`)."""
    ep = torch.export.export(Region(fn), tuple(tensors), strict=False)
    root = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or tempfile.mkdtemp(prefix="autocast_inductor_"))
    return built_or_reused(ep, tensors, root)


def parts(
    args: Sequence[Any], kwargs: Mapping[str, Any] | None, tensors: list[torch.Tensor] | None = None
) -> tuple[list[torch.Tensor], tuple[Any, ...], dict[str, Any]]:
    """The call's tensors, and its arguments with each tensor (or list of them) a :class:`Slot`.

    ``tensors``: a list shared by several calls (a batch): the call's tensors are appended,
    its slots index into it."""
    tensors = [] if tensors is None else tensors
    s_args = tuple(split(a, tensors) for a in args)
    s_kwargs = {k: split(v, tensors) for k, v in (kwargs or {}).items()}
    return tensors, s_args, s_kwargs


def run_in_mode(
    mode: Mode,
    target: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    *,
    device: str,
    dtype: torch.dtype,
    backend: str = DEFAULT_COMPILE_BACKEND,
) -> Any:
    """Call ``target(*args, **kwargs)`` under ``torch.autocast(device, dtype)`` in ``mode``.

    ``target``: an aten op (``aten::mm``, ``aten::add.Tensor``) or an entry point
    (``torch.mm``, ``Tensor.mm``, ``torch.nn.functional.linear``). Tensors and lists
    of tensors become inputs of the compiled function; everything else is a constant
    (part of the cache key). Raises what the mode raises (compilation or run).
    """
    tensors, s_args, s_kwargs = parts(args, kwargs)
    key = (
        mode,
        target,
        tuple(_constant_key(a) for a in s_args),
        tuple((k, _constant_key(v)) for k, v in s_kwargs.items()),
        tuple((t.dtype, tuple(t.shape), t.requires_grad) for t in tensors),
        device,
        dtype,
        backend if mode is Mode.COMPILE else None,
    )
    fn = _CACHE.get(key)
    if fn is None:
        fn = _build(mode, target, s_args, s_kwargs, tensors, device, dtype, backend)
        _CACHE[key] = fn
    return fn(*tensors)


def fresh_in_mode(
    mode: Mode,
    target: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    *,
    device: str,
    dtype: torch.dtype,
    backend: str = DEFAULT_COMPILE_BACKEND,
) -> Callable[[], Any]:
    """Like :func:`run_in_mode`, but build a new function (not cached) and return the call, to
    make as often as wanted: its first call is its own (TorchScript raises some errors on the
    first call of a scripted function only)."""
    tensors, s_args, s_kwargs = parts(args, kwargs)
    fn = _build(mode, target, s_args, s_kwargs, tensors, device, dtype, backend)
    return lambda: fn(*tensors)


def clear_cache() -> None:
    _CACHE.clear()

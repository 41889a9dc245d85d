"""Execution modes: run one op call eagerly, through TorchScript, a trace, or torch.compile.

A pytest sub-plugin (listed in ``conformance.plugin.pytest_plugins``) that adds

* ``--mode eager|script|trace|compile`` (repeatable; default ``eager``),
* ``--compile-backend aot_eager|inductor|...`` (default ``aot_eager``: no C++ toolchain),
* a terminal-summary line counting declared divergences (markers: conformance.registry).

:func:`run_in_mode` is the one entry point other tests call: it wraps a single
op call (an aten op name such as ``aten::mm`` or a public entry point such as
``torch.mm``, ``Tensor.mm`` or ``torch.nn.functional.linear``) in a small
function that enables autocast around it, and runs that function in the mode.
Compiled functions are cached by (mode, target, argument structure, constants,
device, dtype, backend), so a test that calls the same op twice compiles once.

:func:`judge` decides (a pure function) whether a mode's result agrees with
eager autocast, or diverges as ``spec/jit.yaml`` ``mode_divergences`` declares.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from autocast_spec.model import Divergence, Spec
from reference_impl.samples import dtype_name, output_tensors, resolve_entry_point
from reference_impl.torch_registry import op_overload

MODES: tuple[str, ...] = ("eager", "script", "trace", "compile")
COMPILED_MODES: tuple[str, ...] = tuple(m for m in MODES if m != "eager")
DEFAULT_COMPILE_BACKEND = "aot_eager"

# ---------------------------------------------------------------------------
# pytest wiring
# ---------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("autocast-modes", "autocast execution modes")
    group.addoption(
        "--mode",
        action="append",
        choices=MODES,
        default=None,
        help="run the op policy checks through this mode (repeatable; default: eager)",
    )
    group.addoption(
        "--compile-backend",
        default=DEFAULT_COMPILE_BACKEND,
        help="torch.compile backend for --mode compile (default aot_eager; inductor needs a C++ compiler)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With only eager selected there is nothing to compare: drop the per-op mode checks."""
    if any(m != "eager" for m in selected_modes(config)):
        return
    dropped = [i for i in items if getattr(i, "originalname", "") == "test_mode_matches_eager"]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


def selected_modes(config: pytest.Config) -> tuple[str, ...]:
    chosen = config.getoption("--mode", default=None) or ["eager"]
    return tuple(dict.fromkeys(chosen))


def compile_backend(config: pytest.Config) -> str:
    return str(config.getoption("--compile-backend", default=DEFAULT_COMPILE_BACKEND))


DECLARED = "declared divergence: "  # the xfail reason's prefix, counted in the summary


def declared_counts(terminalreporter: Any) -> dict[str, int]:
    """Per mode, the xfailed reports of declared divergences (read in the xdist controller too)."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("xfailed", []):
        reason = str(getattr(report, "wasxfail", ""))
        if reason.startswith(DECLARED):
            mode = reason.removeprefix(DECLARED).split(" ", 1)[0]
            counts[mode] = counts.get(mode, 0) + 1
    return counts


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    modes = [m for m in selected_modes(config) if m != "eager"]
    if not modes:
        return
    counts = declared_counts(terminalreporter)
    parts = ", ".join(f"{m} {counts.get(m, 0)}" for m in modes)
    terminalreporter.write_sep("-", "autocast execution modes")
    terminalreporter.write_line(
        f"declared divergences from eager autocast (spec/jit.yaml mode_divergences), reported xfail: {parts}"
    )
    if "compile" in modes:
        terminalreporter.write_line(f"torch.compile backend: {compile_backend(config)}")


# ---------------------------------------------------------------------------
# One op call, split into tensor inputs and constants
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Slot:
    """A tensor parameter (``index``) or a list of tensor parameters."""

    indices: tuple[int, ...]
    is_list: bool


def _split(value: Any, tensors: list[torch.Tensor]) -> Any:
    """Replace tensors (and lists of tensors) by slots; keep constants."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _Slot((len(tensors) - 1,), False)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        start = len(tensors)
        tensors.extend(value)
        return _Slot(tuple(range(start, len(tensors))), True)
    return value


def _rebuild(value: Any, tensors: Sequence[torch.Tensor]) -> Any:
    if isinstance(value, _Slot):
        return [tensors[i] for i in value.indices] if value.is_list else tensors[value.indices[0]]
    return value


def _constant_key(value: Any) -> Any:
    if isinstance(value, _Slot):
        return ("slot", value.indices, value.is_list)
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_constant_key(v) for v in value))
    return ("const", repr(value))


def resolve_target(target: str) -> Callable[..., Any]:
    """``aten::mm`` / ``aten::add.Tensor`` -> the overload; ``torch.mm`` / ``Tensor.mm`` -> the function."""
    if "::" in target:
        return op_overload(target)
    return resolve_entry_point(target)


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
    fn = resolve_target(target)

    def call(*tensors: torch.Tensor) -> Any:
        with _autocast(device, dtype):
            return fn(
                *(_rebuild(a, tensors) for a in args), **{k: _rebuild(v, tensors) for k, v in kwargs.items()}
            )

    return call


def _literal(value: Any) -> str:
    """A TorchScript source literal for a constant argument."""
    if isinstance(value, _Slot):
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
    rendered = [_literal(a) for a in args] + [f"{k}={_literal(v)}" for k, v in kwargs.items()]
    if "::" in target:
        ns, rest = target.split("::", 1)
        callee = f"torch.ops.{ns}.{rest.split('.')[0]}"
    elif target.startswith("Tensor."):
        callee = f"{rendered.pop(0)}.{target.split('.', 1)[1]}"
    else:
        callee = target
    return (
        "import torch\n\n\n"
        f"def fn({params}):\n"
        f"    with torch.autocast(device_type={device!r}, dtype=torch.{dtype_name(dtype)}):\n"
        f"        return {callee}({', '.join(rendered)})\n"
    )


def _module_fn(source: str) -> Callable[..., Any]:
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
    mode: str,
    target: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    tensors: Sequence[torch.Tensor],
    device: str,
    dtype: torch.dtype,
    backend: str,
) -> Callable[..., Any]:
    if mode in ("script", "compile"):
        # a generated module per call: TorchScript needs source, and Dynamo caches per code
        # object (shared closures would hit its recompile limit and silently run eagerly)
        fn = _module_fn(script_source(target, args, kwargs, len(tensors), device, dtype))
        if mode == "script":
            return torch.jit.script(fn)
        return torch.compile(fn, backend=backend, dynamic=False, fullgraph=True)
    py = _python_fn(target, args, kwargs, device, dtype)
    if mode == "eager":
        return py
    if mode == "trace":
        return torch.jit.trace(py, tuple(tensors), check_trace=False)
    raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")


def run_in_mode(
    mode: str,
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
    kwargs = dict(kwargs or {})
    tensors: list[torch.Tensor] = []
    s_args = tuple(_split(a, tensors) for a in args)
    s_kwargs = {k: _split(v, tensors) for k, v in kwargs.items()}
    key = (
        mode,
        target,
        tuple(_constant_key(a) for a in s_args),
        tuple((k, _constant_key(v)) for k, v in s_kwargs.items()),
        tuple((t.dtype, tuple(t.shape), t.requires_grad) for t in tensors),
        device,
        dtype,
        backend if mode == "compile" else None,
    )
    fn = _CACHE.get(key)
    if fn is None:
        fn = _build(mode, target, s_args, s_kwargs, tensors, device, dtype, backend)
        _CACHE[key] = fn
    return fn(*tensors)


def clear_cache() -> None:
    _CACHE.clear()


# ---------------------------------------------------------------------------
# Judging a mode's result against eager autocast
# ---------------------------------------------------------------------------


def observed_label(result: Any) -> str:
    """What a run produced, as the spec writes it: output dtypes (comma-joined) or ``error``."""
    if isinstance(result, BaseException):
        return "error"
    names = [dtype_name(t.dtype) for t in output_tensors(result)]
    return ",".join(names) if names else "no-tensor"


@dataclass(frozen=True)
class Verdict:
    status: str  # same | declared | undeclared | stale
    detail: str

    @property
    def ok(self) -> bool:
        return self.status in ("same", "declared")


def find_divergence(spec: Spec, mode: str, op: str, dtype: str, inputs: str) -> Divergence | None:
    entry = spec.mode_divergences.get(mode)
    for d in entry.divergences if entry else ():
        if d.op == op and d.dtype in (None, dtype) and d.inputs == inputs:
            return d
    return None


def judge(
    mode: str, op: str, dtype: str, inputs: str, eager: str, observed: str, declared: Divergence | None
) -> Verdict:
    """Pure decision: does ``observed`` (the mode's label) agree with eager, or diverge as declared?"""
    where = f"{mode} {op} (autocast {dtype}, {inputs} inputs)"
    when = f" [condition: {declared.condition}]" if declared is not None and declared.condition else ""
    if observed == eager:
        if declared is not None:
            return Verdict(
                "stale",
                f"{where}: spec/jit.yaml declares a divergence ({declared.observed}){when} but the mode "
                f"now agrees with eager ({eager}); remove the entry from mode_divergences.{mode}",
            )
        return Verdict("same", f"{where}: {eager}")
    if declared is not None and declared.observed_under(dtype) == observed:
        return Verdict("declared", f"{where}: {observed} instead of eager {eager}: {declared.reason}{when}")
    hint = (
        f"declared as {declared.observed_under(dtype)!r}{when}, observed {observed!r}"
        if declared is not None
        else f"undeclared: add to spec/jit.yaml mode_divergences.{mode}: "
        f"{{op: {op}, dtype: {dtype}, inputs: {inputs}, observed: {observed}, reason: ...}}"
    )
    return Verdict("undeclared", f"{where}: eager gives {eager}, {mode} gives {observed} ({hint})")


# ---------------------------------------------------------------------------
# Autocast state, for the exception-restoration check
# ---------------------------------------------------------------------------


STATE_FIELDS = ("enabled", "dtype", "cache_enabled", "nesting")


def nesting_depth() -> int:
    """The autocast nesting counter (``torch.autocast_increment_nesting`` returns the new depth)."""
    depth = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return int(depth) - 1


def autocast_state(device: str) -> tuple[bool, str, bool, int]:
    """(enabled, dtype, cache_enabled, nesting depth): what leaves a region as it found it."""
    return (
        bool(torch.is_autocast_enabled(device)),
        dtype_name(torch.get_autocast_dtype(device)),
        bool(torch.is_autocast_cache_enabled()),
        nesting_depth(),
    )


def state_change(before: tuple[object, ...], after: tuple[object, ...]) -> str:
    """Which fields of :func:`autocast_state` changed ("" when none), e.g. ``nesting changed``."""
    return ", ".join(f"{f} changed" for f, b, a in zip(STATE_FIELDS, before, after, strict=True) if b != a)


@contextlib.contextmanager
def restored_state(device: str) -> Iterator[None]:
    """Put the autocast state back whatever a failing check did (so one failure cannot leak)."""
    before = (
        torch.is_autocast_enabled(device),
        torch.get_autocast_dtype(device),
        torch.is_autocast_cache_enabled(),
    )
    depth = nesting_depth()
    try:
        yield
    finally:
        torch.set_autocast_enabled(device, before[0])
        torch.set_autocast_dtype(device, before[1])
        torch.set_autocast_cache_enabled(before[2])
        while nesting_depth() > depth:
            torch.autocast_decrement_nesting()
        while nesting_depth() < depth:
            torch.autocast_increment_nesting()

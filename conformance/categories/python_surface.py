"""python_surface: autocast's public Python entry points behave as ``spec/python_surface.yaml`` says.

Cases, per dtype under test, generated from the spec's ``entry_points`` and ``validation``:

* ``alias``: each region entry point with ``alias_of: torch.autocast`` bound to the device
  under test (or to none), called positionally (its ``positional`` parameters, in order) and
  by keyword, enabled and disabled, in eager and under ``torch.compile`` (aot_eager);
* ``argument``: each ``validation`` entry for ``torch.autocast``: it given that argument, in eager
  and opened inside a ``torch.compile`` (aot_eager, fullgraph) function (``-compile``);
* ``getter``: each ``dtype_getter`` for the device (``torch.get_autocast_dtype(device)``, the
  legacy per-device getters), inside a region of the dtype under test, in eager and from a
  compiled (fullgraph) function the region encloses, as models ask it (``-compile``);
* ``cache_threads``: a weight's cast cached in a region, the weight changed in place, the cache
  cleared from another thread (each ``cache_clear`` entry point). Eager only: a compiled graph
  casts the weight on every call, without autocast's cache;
* ``entry_point``: every entry point bound to the device (or to none), and every legacy state
  getter and setter of another device (they only touch that device's thread-local state),
  called once in the form of its ``role`` (``reference_impl.harness.surface.call_in_role``: a
  region entered; a getter asked, with the device unless it is bound to one; a setter given
  the value it holds; a decorator applied, with ``device_type`` unless bound).

Without the device's runtime (policy-only), only the getters and legacy state entry points run.

Procedure and expectation, per kind (its parameters a typed variant, :class:`Alias`, ...,
holding the spec's own entry, the test id built from them):

* ``alias``: the autocast state inside the region (enabled, dtype) and the output dtype of the
  spec's probe op are ``torch.autocast(device, dtype=..., enabled=...)``'s;
* ``argument``: it raises the declared error type with the declared message (under compile,
  the entry's ``compiled`` error where it states one); or it warns and the region stays
  disabled; or (dtype None) the region uses the device's default dtype (under compile, read
  from the probe op's output);
* ``getter``: it returns the canonical ``torch.dtype`` object (``is``, not only ``==``); under
  compile, where the entry states a ``compiled`` graph break, fullgraph stops there and the
  function compiled without fullgraph gets the canonical object;
* ``cache_threads``: the next call in the region casts the changed weight again (the clear
  reached this thread's cache);
* ``entry_point``: it exists in this torch and runs, warning with its declared ``warning`` when
  deprecated in the release the spec is read for (``deprecated`` names that release or an
  earlier one), and with no deprecation warning otherwise.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from autocast_spec.surface import STATE_ROLES, ArgumentCheck, EntryPointInfo, Role
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.devices import device_is_real
from reference_impl.harness.samples import resolve_entry_point
from reference_impl.harness.state import autocast_state_kept, quiet, snapshot_autocast
from reference_impl.harness.surface import call_in_role, compiled_call, region_args

from ..kit.case import Case, shown
from ..kit.category import Category
from ..kit.verdict import Observation, first_line, not_applicable, one_line
from ..target import Target

ALIAS = "python_surface.alias"
ARGUMENT = "python_surface.argument"
GETTER = "python_surface.getter"
CACHE_THREADS = "python_surface.cache_threads"
ENTRY_POINT = "python_surface.entry_point"
COMPILED = "torch.compile(backend='aot_eager', fullgraph=True)"


def _run(compiled: bool) -> str:
    return "compile" if compiled else "eager"


@dataclass(frozen=True)
class Alias:
    """A region entry point with ``alias_of: torch.autocast``, called in one form."""

    entry: EntryPointInfo
    # its arguments positionally (its ``positional`` parameters, in order), else by keyword
    positional: bool = shown("positional", "keyword")
    enabled: bool = shown("enabled", "disabled")
    # inside a torch.compile(backend="aot_eager", fullgraph=True) function
    compiled: bool = shown("-compile", default=False)
    ID: ClassVar[str] = "alias-{entry.name}-{positional}-{enabled}{compiled}"


@dataclass(frozen=True)
class Argument:
    """``torch.autocast`` given one argument of the wrong kind (a ``validation`` entry)."""

    check: ArgumentCheck
    # the region opened inside a torch.compile(fullgraph=True) function
    compiled: bool = shown("-compile", default=False)
    ID: ClassVar[str] = "argument-{check.argument}={check.value}{compiled}"


@dataclass(frozen=True)
class OfEntry:
    """A check of one entry point: the test id names the check's kind and the entry point."""

    entry: EntryPointInfo


@dataclass(frozen=True)
class Getter(OfEntry):
    """A dtype getter asked inside a region of the dtype under test."""

    # asked by a torch.compile(fullgraph=True) function the region encloses
    compiled: bool = shown("-compile", default=False)
    ID: ClassVar[str] = "getter-{entry.name}{compiled}"


class CacheThreads(OfEntry):
    ID: ClassVar[str] = "cache_threads-{entry.name}"  # a cache_clear entry point called from another thread


class EntryPointCall(OfEntry):
    ID: ClassVar[str] = "entry_point-{entry.name}"  # called once in the form of its role


Variant = Alias | Argument | Getter | CacheThreads | EntryPointCall


def cases(target: Target) -> list[Case]:
    surface, device = target.spec.surface, target.device
    here = [e for e in surface.entry_points if e.bound_to(device)]
    variants: list[Variant] = [
        Alias(e, positional, enabled, compiled)
        for e in here
        if e.alias_of
        for positional in (True, False)
        for enabled in (True, False)
        for compiled in (False, True)
    ]
    autocast = surface.canonical_region  # the validation entries for torch.autocast; the others: call_forms
    checks = [v for v in surface.validation if autocast and v.selects(autocast)]
    variants += [Argument(v, compiled) for v in checks for compiled in (False, True)]
    variants += [
        Getter(e, compiled) for e in here if e.role is Role.DTYPE_GETTER for compiled in (False, True)
    ]
    variants += [CacheThreads(e) for e in here if e.role is Role.CACHE_CLEAR]
    variants += [
        EntryPointCall(e) for e in surface.entry_points if e.bound_to(device) or e.role in STATE_ROLES
    ]
    return [Case("python_surface", device, dtype, params=v) for dtype in target.dtypes for v in variants]


CATEGORY = Category(
    "python_surface",
    __doc__,
    checks=(ALIAS, ARGUMENT, GETTER, CACHE_THREADS, ENTRY_POINT),
    generators=(cases,),
)


def region_state(target: Target, make: Callable[[], Any], compiled: bool) -> str:
    """``enabled, dtype; probe op's output dtype`` inside the region ``make()`` opens."""
    device = target.device
    a, b = torch.randn(4, 4, device=device), torch.randn(4, 4, device=device)

    def body(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with make():
            return torch.mm(x, y)

    if compiled:
        with quiet():
            return f"mm -> {dtype_name(compiled_call(body, a, b).dtype)}"
    with quiet(), make():
        on, dtype, out = torch.is_autocast_enabled(device), torch.get_autocast_dtype(device), torch.mm(a, b)
    return f"enabled {on}, dtype {dtype_name(dtype)}; mm -> {dtype_name(out.dtype)}"


def alias(target: Target, case: Case, v: Alias) -> Observation:
    e = v.entry
    dtype = case.lower
    args, kwargs = region_args(e, target.device, dtype, v.enabled, v.positional)
    fn = resolve_entry_point(e.name)
    expected = region_state(
        target, lambda: torch.autocast(target.device, dtype=dtype, enabled=v.enabled), v.compiled
    )
    try:
        observed = region_state(target, lambda: fn(*args, **kwargs), v.compiled)
    except Exception as exc:
        observed = f"error: {one_line(exc)}"
    call = f"{e.name}({', '.join([repr(a) for a in args] + [f'{k}={w!r}' for k, w in kwargs.items()])})"
    what = f"{call} must behave like torch.autocast ({_run(v.compiled)})"
    return Observation(case, ALIAS, what, expected, observed, facts={"called": call})


_VALUES: dict[str, Callable[[Target], Any]] = {
    "torch_device": lambda t: torch.device(t.device),
    "unknown_string": lambda t: "no_such_device",
    "none": lambda t: None,
    "float32": lambda t: torch.float32,
    "float64": lambda t: torch.float64,
    "int32": lambda t: torch.int32,
    "string": lambda t: "yes",
    "int": lambda t: 1,
}


def _device_rule(target: Target, v: ArgumentCheck) -> ArgumentCheck:
    """``unsupported_dtype``: what the device file's rule says for a dtype it does not support
    (CPU warns and disables; CUDA accepts any; a vendor may raise)."""
    if v.outcome != "unsupported_dtype":
        return v
    rule = target.device_spec.unsupported_dtype
    if rule is None:
        not_applicable(f"the {target.device} device file states no unsupported_dtype rule")
    if rule.action == "accepted":
        return replace(v, outcome="accepted", error=None, message=None)
    if rule.action == "warn_and_disable":
        return replace(v, outcome="warns_and_disables", error="UserWarning", message=rule.text(target.device))
    return replace(v, outcome="raises", error="RuntimeError", message=rule.text(target.device))


def _expected_argument(target: Target, v: ArgumentCheck) -> str:
    if v.outcome == "accepted":
        return f"enabled, dtype {v.value}"
    if v.outcome == "raises":
        return f"raises {v.error}: ...{v.message}..."
    if v.outcome == "warns_and_disables":
        return f"warns {v.error}: ...{v.message}...; disabled"
    return f"enabled, dtype {target.device_spec.default_dtype}"


def _under_compile(check: ArgumentCheck, compiled: bool) -> ArgumentCheck:
    """Under compile, the error the spec's ``compiled`` states where it states one."""
    c = check.compiled
    if not compiled or c is None or check.outcome != "raises":
        return check
    return replace(check, error=c.error, message=c.message)


def _integral(kwargs: dict[str, Any]) -> bool:  # an integer dtype CUDA accepts has no mm kernel: read as set
    return isinstance(d := kwargs.get("dtype"), torch.dtype) and not d.is_floating_point


def _open(kwargs: dict[str, Any], device: str, compiled: bool) -> tuple[bool, str]:
    """Whether ``torch.autocast(**kwargs)`` is enabled, and its dtype: read inside it in eager; under
    compile, the dtype the probe op gives inside it (an integer dtype: the getter's)."""
    if not compiled:
        with torch.autocast(**kwargs):
            return torch.is_autocast_enabled(device), dtype_name(torch.get_autocast_dtype(device))

    def body(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
        with torch.autocast(**kwargs):
            out = x.to(torch.get_autocast_dtype(device)) if _integral(kwargs) else torch.mm(x, x)
            return out, torch.is_autocast_enabled(device)

    out, on = compiled_call(body, torch.randn(4, 4, device=device))
    return on, dtype_name(out.dtype)


def argument(target: Target, case: Case, v: Argument) -> Observation:
    name, value = v.check.argument, v.check.value
    check = _under_compile(_device_rule(target, v.check), v.compiled)
    kwargs: dict[str, Any] = {"device_type": target.device, "dtype": case.lower}
    kwargs[name] = _VALUES[value](target)
    expected = _expected_argument(target, check)
    region = ", ".join(
        f"{k}={f'torch.{w!r}' if isinstance(w, torch.device) else repr(w)}" for k, w in kwargs.items()
    )
    what = f"torch.autocast({name}={kwargs[name]!r}) ({_run(v.compiled)})"
    facts = {"under compile": check.compiled.cited} if check.compiled and v.compiled else {}
    probe = f"x.to(torch.get_autocast_dtype({target.device!r}))" if _integral(kwargs) else "torch.mm(x, x)"
    steps = (f"{COMPILED}: def f(x): with torch.autocast({region}): return {probe}",) * v.compiled
    with warnings.catch_warnings(record=True) as caught, autocast_state_kept(target.device) as found:
        warnings.simplefilter("always")
        try:
            on, got = _open(kwargs, target.device, v.compiled)
        except Exception as exc:  # raised, and the state as it found it (a region that raises from __enter__)
            matches = type(exc).__name__ == check.error and (check.message or "") in str(exc)
            observed = expected if matches and check.outcome == "raises" else f"raises {one_line(exc)}"
            observed += "".join(f"; left {d}" for d in found.differences(snapshot_autocast(target.device)))
            return Observation(case, ARGUMENT, what, expected, observed, facts=facts, steps=steps)
    if check.outcome == "warns_and_disables":
        warned = any(
            type(w.message).__name__ == check.error and (check.message or "") in str(w.message)
            for w in caught
        )
        observed = expected if warned and not on else f"warned {warned}, enabled {on}, dtype {got}"
    else:
        observed = f"enabled, dtype {got}" if on else f"disabled, dtype {got}"
    return Observation(case, ARGUMENT, what, expected, observed, facts=facts, steps=steps)


def _getter_compiled(
    e: EntryPointInfo, device: str, args: tuple[Any, ...], dtype: torch.dtype, seen: Callable[[Any], str]
) -> str:
    """What a compiled function the region encloses gets from the getter: with fullgraph, else
    (a graph break) the graph break and what it gets without fullgraph."""
    fn = resolve_entry_point(e.name)

    def body(x: torch.Tensor) -> tuple[torch.Tensor, Any]:
        return x + 1, fn(*args)

    x = torch.ones(2)  # the getter's answer does not depend on where tensors live
    with quiet(), torch.autocast(device, dtype=dtype):
        try:
            return seen(compiled_call(body, x)[1])
        except torch._dynamo.exc.Unsupported as exc:
            brk = e.compiled
            why = f"...{brk.message}..." if brk and brk.message in str(exc) else f"({first_line(exc)[:200]})"
            return f"graph break {why}; without fullgraph: {seen(compiled_call(body, x, fullgraph=False)[1])}"


def getter(target: Target, case: Case, v: Getter) -> Observation:
    e = v.entry
    dtype = case.lower
    args = () if e.device else (target.device,)
    canonical = f"torch.{dtype_name(dtype)} (the same object)"

    def seen(got: Any) -> str:
        return canonical if got is dtype else f"{got!r} ({type(got).__name__})"

    brk = e.compiled if v.compiled else None
    expected = f"graph break ...{brk.message}...; without fullgraph: {canonical}" if brk else canonical
    if v.compiled:
        observed = _getter_compiled(e, target.device, args, dtype, seen)
    else:
        with quiet(), torch.autocast(target.device, dtype=dtype):
            observed = seen(resolve_entry_point(e.name)(*args))
    facts = {"under compile": brk.cited} if brk else {}
    what = f"{e.name} returns the canonical dtype object ({_run(v.compiled)})"
    call = f"{e.name}({', '.join(map(repr, args))})"
    region = f"torch.autocast({target.device!r}, dtype={case.dtype})"
    steps = (f"inside {region}, {COMPILED}: def f(x): return x + 1, {call}",) * v.compiled
    return Observation(case, GETTER, what, expected, observed, facts=facts, steps=steps)


def cache_threads(target: Target, case: Case, v: CacheThreads) -> Observation:
    """A cast cached in a region, the weight changed in place, the cache cleared by another thread."""
    x = torch.randn(4, 4, device=target.device)
    w = torch.randn(4, 4, device=target.device, requires_grad=True)
    with torch.autocast(target.device, dtype=case.lower):
        first = torch.nn.functional.linear(x, w)
        with torch.no_grad():
            w.add_(1.0)
        worker = threading.Thread(target=resolve_entry_point(v.entry.name))
        worker.start()
        worker.join()
        after = torch.nn.functional.linear(x, w)
    want = "the changed weight is cast again"
    observed = want if not torch.equal(first, after) else "the stale cast is served"
    what = f"{v.entry.name}() from another thread must clear this thread's casts"
    return Observation(case, CACHE_THREADS, what, want, observed)


def entry_point(target: Target, case: Case, v: EntryPointCall) -> Observation:
    e = v.entry
    device = target.device
    if e.role is Role.REGISTRATION and device not in target.spec.rules.custom_ops.register_autocast_devices:
        not_applicable(f"rules.custom_ops.register_autocast_devices does not name {device}")
    expected = f"runs, warns {e.warning}" if e.deprecated else "runs, no deprecation warning"
    error: str | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call_in_role(e, device)
        except Exception as exc:
            error = one_line(exc)
    deprecations = [w for w in caught if issubclass(w.category, (DeprecationWarning, FutureWarning))]
    if error is not None:
        observed = f"raises {error}"
    elif e.deprecated:
        named = [w for w in deprecations if w.category.__name__ == e.warning]
        observed = expected if named else f"runs, warns {[w.category.__name__ for w in caught] or 'nothing'}"
    elif deprecations:
        observed = f"runs, warns {deprecations[0].category.__name__}: {str(deprecations[0].message)[:200]}"
    else:
        observed = expected
    role = e.role.value + (f", deprecated in {e.deprecated_in}" if e.deprecated else "")
    return Observation(case, ENTRY_POINT, f"{e.name} ({role}) called once", expected, observed)


def check(target: Target, case: Case[Variant]) -> Observation:
    v = case.params
    state_only = isinstance(v, Getter) or (isinstance(v, EntryPointCall) and v.entry.role in STATE_ROLES)
    if not state_only and not device_is_real(target.device):
        not_applicable(
            f"torch.autocast({target.device!r}) disables itself where {target.device} has no runtime "
            "(a policy-only run without the device): its Python surface is checked on the device"
        )
    kinds: dict[type, Callable[..., Observation]] = {
        Alias: alias,
        Argument: argument,
        Getter: getter,
        CacheThreads: cache_threads,
        EntryPointCall: entry_point,
    }
    return kinds[type(v)](target, case, v)

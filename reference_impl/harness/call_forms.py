"""Call forms of autocast's Python surface as standalone programs (``spec/python_surface.yaml``
``call_forms`` and ``validation``): each form is a short script that :func:`run` executes and a
failure prints as it is, so the reproduction is the program that ran.

A program ends with ``out = ...``, what it observes. A region or decorator form does its work
in ``f(x)``, which a compiled form hands to ``torch.compile`` first; ``probe(x)`` is what a body
sees: ``(is_autocast_enabled, get_autocast_dtype, torch.mm(x, x).dtype)`` for the device.

Region and decorator forms are templates over the region an entry point opens: the form's
program uses the entry point as the form says; its canonical program does the same work with
``with torch.autocast(device, dtype=...)`` (a fresh region at each use); its ``outside`` program
does the work with no region. Argument forms call the entry point with its parameters
(``EntryPointInfo.parameters``) passed another way; their canonical program is the positional call.
"""

from __future__ import annotations

import linecache
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.surface import EntryPointInfo, Parameter, ParameterKind, Role

from ..engine.dtypes import dtype_name
from .state import autocast_state_kept, quiet, snapshot_autocast

PRELUDE = """\
import torch
x = torch.randn(4, 4, device={device!r})


def probe(x):
    on, dtype = torch.is_autocast_enabled({device!r}), torch.get_autocast_dtype({device!r})
    return on, dtype, torch.mm(x, x).dtype"""


def _code(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


@dataclass(frozen=True)
class Template:
    """A region or decorator form: ``setup`` at module level, then ``body`` (``f``'s body).

    Region forms: ``{R}`` is the region at each use (the form's: ``ac`` where ``setup`` makes it
    once with ``ac = {region}``, else the entry point's call; canonical: a fresh
    ``torch.autocast``), ``{cls}`` the entry point itself, ``{sub}`` its call on a subclass ``Sub``.
    Decorator forms: ``body`` is the use of the target (``f`` returns it and ``probe(x)`` after
    it); a line ``{deco}`` in ``setup`` is the decorator (dropped without a region), ``{wrap}`` the
    region called on a target. ``canonical``: the canonical body, where it is not ``body`` with
    ``{R}`` fresh. Wrong targets (``full``): ``body`` is ``f``'s whole body.
    """

    body: str
    setup: str = ""
    canonical: str | None = None
    eager_only: bool = False  # cannot run inside a compiled function (asyncio; a class body)
    full: bool = False

    def part(self, name: str) -> str:
        text = getattr(self, name)
        return "" if text is None else _code(text)


_WRAPPER = """
    class Wrapper:
        def __init__(self):
            self.inner = {region}

        def __enter__(self):
            return self.inner.__enter__()

        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)


    ac = Wrapper()
"""
_ONE = "with {R}:\n    return probe(x)"
_NESTED = """
    with {R}:
        with {R}:
            a = probe(x)
        b = probe(x)
    return a, b, probe(x)
"""

REGION_TEMPLATES: Mapping[str, Template] = {
    # canonical: the as-target is the region object (torch.autocast.__enter__ returns self)
    "with_as": Template(
        "with {R} as ac:\n    return probe(x), isinstance(ac, torch.autocast)",
        canonical="with {R}:\n    return probe(x), True",
    ),
    "reused": Template(
        "with {R}:\n    a = probe(x)\nwith {R}:\n    b = probe(x)\nreturn a, b, probe(x)", "ac = {region}"
    ),
    "reentered": Template(_NESTED, "ac = {region}"),
    "enter_exit_methods": Template(
        "ac.__enter__()\na = probe(x)\nac.__exit__(None, None, None)\nreturn a, probe(x)",
        "ac = {region}",
        canonical="with {R}:\n    a = probe(x)\nreturn a, probe(x)",
    ),
    "exit_without_enter": Template("{region}.__exit__(None, None, None)\nreturn probe(x)"),
    "async_with": Template(
        "return asyncio.run(g(x))",
        "import asyncio\n\n\nasync def g(x):\n    async with {region}:\n        return probe(x)",
        eager_only=True,
    ),
    "class_as_region": Template("with {cls}:\n    return probe(x)"),
    "user_wrapper": Template("with ac:\n    return probe(x)", _WRAPPER, canonical=_ONE),
    "subclass": Template("with {sub}:\n    return probe(x)", "class Sub({cls}):\n    pass", canonical=_ONE),
}

_METHOD = """
    class M:
        {decorators}
        def m({first}x):
            return probe(x)
"""
_CLASS = """
    {deco}
    class C:
        def __init__(self, x):
            self.seen = probe(x)

        def later(self, x):
            return self.seen, probe(x)
"""
_MODULE = """
    class P(torch.nn.Module):
        def forward(self, x):
            return probe(x)


    g = {wrap}(P())
"""
DECORATOR_TEMPLATES: Mapping[str, Template] = {
    "function": Template("g(x)", "{deco}\ndef g(x):\n    return probe(x)"),
    "lambda": Template("g(x)", "g = {wrap}(lambda x: probe(x))"),
    "method": Template("m.m(x)", _METHOD.format(decorators="{deco}", first="self, ") + "\n\n    m = M()\n"),
    "staticmethod": Template("M.m(x)", _METHOD.format(decorators="@staticmethod\n        {deco}", first="")),
    "classmethod": Template(
        "M.m(x)", _METHOD.format(decorators="@classmethod\n        {deco}", first="cls, ")
    ),
    "module": Template("g(x)", _MODULE),
    "class": Template(
        "C(x).later(x)", _CLASS, canonical="with {R}:\n    c = C(x)\nreturn c.later(x), probe(x)"
    ),
    "generator": Template("list(g(x))", "{deco}\ndef g(x):\n    yield probe(x)"),
    "coroutine": Template(
        "asyncio.run(g(x))",
        "import asyncio\n\n\n{deco}\nasync def g(x):\n    return probe(x)",
        eager_only=True,
    ),
    "recursive": Template("g(x, 2)", "{deco}\ndef g(x, n):\n    return probe(x) if n == 0 else g(x, n - 1)"),
    # wrong targets: the region called, in the frame, on what is not a function
    "tensor": Template("return {region}(x)", full=True),
    "none": Template("return {region}(None)", full=True),
    "bare": Template("g = {cls}(lambda y: probe(y))\nreturn g(x)", full=True),
    "classmethod_object": Template(
        "return M.m(x)",
        _METHOD.format(decorators="@{region}\n        @classmethod", first="cls, "),
        eager_only=True,
        full=True,
    ),
}


def region_call(e: EntryPointInfo, device: str, dtype: torch.dtype, cls: str | None = None) -> str:
    """The entry point's region for ``device`` and ``dtype`` (``cls``: a subclass's call)."""
    here = "" if e.device else f"{device!r}, "
    return f"{cls or e.name}({here}dtype=torch.{dtype_name(dtype)})"


@dataclass(frozen=True)
class Program:
    """A standalone script; ``out`` is what it observes."""

    text: str

    def shown(self) -> str:
        return self.text + "\nprint(out)"


def _fill(template: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def _function(setup: str, body: str, device: str, compiled: str | None, fullgraph: bool) -> Program:
    parts = [PRELUDE.format(device=device), setup] if setup else [PRELUDE.format(device=device)]
    parts.append("def f(x):\n" + textwrap.indent(body, "    "))
    if compiled:
        parts.append(f"f = torch.compile(f, backend={compiled!r}, fullgraph={fullgraph})")
    return Program("\n\n\n".join(parts) + "\n\n\nout = f(x)")


@dataclass(frozen=True)
class FormPrograms:
    """A form's program, the canonical one, and (decorator forms) the same work with no region."""

    form: Program
    canonical: Program
    outside: Program | None = None


def region_programs(
    form: str,
    e: EntryPointInfo,
    canonical: EntryPointInfo,
    device: str,
    dtype: torch.dtype,
    compiled: str | None,
    fullgraph: bool = True,
) -> FormPrograms:
    """A region form (``REGION_TEMPLATES``) or decorator form (``DECORATOR_TEMPLATES``) of ``e``,
    judged by ``canonical``'s region. ``compiled``: the backend the form's ``f`` is compiled with;
    the canonical and outside programs run eagerly (eager autocast is what a compiled form must give)."""
    region = region_call(e, device, dtype)
    fresh = region_call(canonical, device, dtype)
    names = {"region": region, "cls": e.name, "sub": region_call(e, device, dtype, "Sub")}

    def made(setup: str, body: str, in_mode: bool = False) -> Program:
        return _function(setup, body, device, compiled if in_mode else None, fullgraph)

    t = REGION_TEMPLATES.get(form) or DECORATOR_TEMPLATES[form]
    setup, body = _fill(t.part("setup"), names), t.part("body")
    if form in REGION_TEMPLATES:
        stored = "ac = " in setup
        own = _fill(body, {**names, "R": "ac" if stored else region})
        same = _fill(t.part("canonical") or body, {**names, "R": fresh})
        return FormPrograms(made(setup, own, True), made("" if stored else setup, same))
    if t.full:
        return FormPrograms(made(setup, _fill(body, names), True), made(setup, _fill(body, names)))
    decorated = _fill(setup, {"deco": "@" + region, "wrap": region})
    plain = _fill("\n".join(ln for ln in setup.split("\n") if ln.strip() != "{deco}"), {"wrap": ""})
    use = f"return {body}, probe(x)"
    same = _fill(
        t.part("canonical") or f"with {{R}}:\n    inside = {body}\nreturn inside, probe(x)", {"R": fresh}
    )
    return FormPrograms(made(decorated, use, True), made(plain, same), made(plain, use))


# Argument forms: an entry point called with its parameters passed in one way

DECORATOR_SETUP = """\
import types


def body(ctx, x):
    return probe(x)


ctx = types.SimpleNamespace(_fwd_used_autocast=False, _dtype=torch.float16)"""

WRONG_VALUES: Mapping[str, str] = {
    "torch_device": "torch.device({device!r})",
    "unknown_string": "'no_such_device'",
    "none": "None",
    "float32": "torch.float32",
    "float64": "torch.float64",
    "int32": "torch.int32",
    "string": "'yes'",
    "int": "1",
}


def parameter_values(e: EntryPointInfo, device: str, dtype: torch.dtype, op: str) -> dict[str, str]:
    """Each parameter's value as source text: a setter is given the value its device (the cache
    setter: autocast) does not hold, so the call shows; a region the dtype under test; a
    decorator the function ``body``; a registration the custom op ``op``."""
    dev = e.device or device
    setter = e.role in (Role.ENABLED_SETTER, Role.DTYPE_SETTER, Role.CACHE_SETTER)
    held = (
        torch.is_autocast_cache_enabled() if e.role is Role.CACHE_SETTER else torch.is_autocast_enabled(dev)
    )
    other = torch.float16 if torch.get_autocast_dtype(dev) != torch.float16 else torch.bfloat16
    return {
        "device_type": repr(device),
        "dtype": f"torch.{dtype_name(other if setter else dtype)}",
        "enabled": repr(not held if setter else True),
        "cache_enabled": "True",
        "fwd": "body",
        "bwd": "body",
        "op": repr(op),
        "cast_inputs": "torch.float32",
    }


def argument_call(e: EntryPointInfo, form: str, values: Mapping[str, str]) -> str:
    """``e`` called in an argument form: ``positional`` (keyword-only parameters by keyword: the
    canonical call); ``keyword``, ``keyword_for_positional_only`` (every one by keyword);
    ``extra_positional``; ``unknown_keyword``; ``missing_argument`` (the last required one left
    out, the others by keyword where they may be); ``repeated_argument`` (the first one
    positionally and by keyword); ``swapped_arguments`` (the first two positional ones swapped)."""
    params = list(e.parameters)
    if form == "missing_argument":
        params.remove([p for p in params if p.required][-1])

    def by_keyword(p: Parameter) -> bool:
        if p.kind is ParameterKind.KEYWORD_ONLY or form.startswith("keyword"):
            return True
        return form == "missing_argument" and p.kind is not ParameterKind.POSITIONAL_ONLY

    pos = [values[p.name] for p in params if not by_keyword(p)]
    kw = [f"{p.name}={values[p.name]}" for p in params if by_keyword(p)]
    if form == "extra_positional":
        pos.append("None")
    elif form == "unknown_keyword":
        kw.append("no_such_argument=None")
    elif form == "repeated_argument":
        kw.insert(0, f"{params[0].name}={values[params[0].name]}")
    elif form == "swapped_arguments":
        pos[0], pos[1] = pos[1], pos[0]
    return f"{e.name}({', '.join(pos + kw)})"


def argument_program(
    e: EntryPointInfo,
    canonical: EntryPointInfo,
    form: str,
    device: str,
    dtype: torch.dtype,
    op: str,
    compiled: str | None = None,
    wrong: tuple[str, str] | None = None,
) -> Program:
    """``e`` called in an argument form (``positional``: the canonical call), observing what its
    role gives: a region's body (``compiled``: inside a compiled ``f``), a decorator's body called
    through it in ``canonical``'s region, else the call's result. ``wrong``: (argument,
    ``WRONG_VALUES`` key)."""
    values = parameter_values(e, device, dtype, op)
    if wrong is not None:
        values[wrong[0]] = WRONG_VALUES[wrong[1]].format(device=device)
    call = argument_call(e, form, values)
    if e.role is Role.REGION:
        return _function("", f"with {call}:\n    return probe(x)", device, compiled, True)
    if e.role is Role.DECORATOR:
        region = region_call(canonical, device, dtype)
        use = f"g = {call}\nwith {region}:\n    out = g(ctx, x), ctx._dtype, ctx._fwd_used_autocast"
        return Program(f"{PRELUDE.format(device=device)}\n\n\n{DECORATOR_SETUP}\n\n\n{use}")
    if e.role is Role.REGISTRATION:
        define = (
            f"@torch.library.custom_op({op!r}, mutates_args=())\ndef op(x: torch.Tensor) -> torch.Tensor:"
        )
        return Program(f"import torch\n\n\n{define}\n    return x.clone()\n\n\nout = {call} is None")
    return Program(f"import torch\n\n\nout = {call}")  # no tensor: the device need not be there


# Running a program


def shown(value: Any) -> str:
    """A program's ``out`` as text: dtypes by name, through tuples and lists."""
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, (tuple, list)):
        inner = ", ".join(shown(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    return repr(value)


@dataclass(frozen=True)
class Ran:
    """What a program did: its ``out`` as text or the error it raised, and how it left the state."""

    out: str | None
    error: Exception | None
    state: tuple[str, ...]  # the differences from the state it found (put back afterwards)


_RUNS = [0]


def run(program: Program, device: str) -> Ran:
    """Execute the program (warnings silenced; Dynamo reset first where it compiles); the autocast
    state of ``device`` (and cpu) is put back after."""
    _RUNS[0] += 1
    name = f"<call_form {_RUNS[0]}>"
    linecache.cache[name] = (len(program.text), None, program.text.splitlines(keepends=True), name)
    devices = tuple(dict.fromkeys((device, "cpu")))
    namespace: dict[str, Any] = {"__name__": "__call_form__"}
    if "torch.compile(" in program.text:
        torch._dynamo.reset()
    with quiet(), autocast_state_kept(*devices) as before:
        try:
            exec(compile(program.text, name, "exec"), namespace)
            out, error = shown(namespace.get("out")), None
        except Exception as exc:
            out, error = None, exc
        state = tuple(before.differences(snapshot_autocast(*devices)))
    return Ran(out, error, state)

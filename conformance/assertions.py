"""Shared assertions. A failure names what differs and prints a reproduction.

The reproduction is a short Python snippet the reader can paste: the call with
its inputs' shapes and dtypes on the device, under ``torch.autocast``, and what
the spec expects next to what was observed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from autocast_spec.common import Tolerance
from reference_impl.compare import bound, tensor_mismatch
from reference_impl.dtypes import dtype_name
from reference_impl.samples import Materialized

from .cases import Case
from .refusal import error_text, skip_if_refused
from .runner import Outcome


def _shape(t: torch.Tensor) -> str:
    return f"{dtype_name(t.dtype)}{list(t.shape)}@{t.device.type}"


def describe(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        return _shape(v)
    if isinstance(v, (list, tuple)):
        inner = ", ".join(describe(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    if isinstance(v, torch.dtype):
        return str(v)
    return repr(v)


def _literal(v: Any, names: list[str]) -> str:
    if isinstance(v, torch.Tensor):
        return names.pop(0)
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x, names) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(_literal(x, names) for x in v) + ",)"
    if isinstance(v, torch.dtype):
        return str(v)
    return repr(v)


def _callable_text(case: Case, entry: str) -> str:
    if entry.startswith("aten::"):
        ns, _, rest = entry.partition("::")
        name, _, overload = rest.partition(".")
        return f"torch.ops.{ns}.{name}.{overload or 'default'}"
    return entry


# What a snippet imports besides torch: the modules the run loaded with -p (a vendor's
# backend registers its device there, so a snippet without them cannot run). Set once per
# process by the plugin at configure time.
_PREAMBLE: list[str] = ["import torch"]


def set_plugins(plugins: Sequence[str]) -> None:
    """The ``-p`` plugins of this run that are modules (``no:NAME`` disables a plugin, and an
    entry-point name need not be a module: neither is imported)."""
    _PREAMBLE[1:] = [f"import {p}" for p in plugins if not p.startswith("no:") and _is_module(p)]


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def reproduction(case: Case, m: Materialized | None, entry: str | None = None, note: str = "") -> str:
    """A copy-paste snippet for one call of ``case``."""
    entry = entry or case.entry or case.op
    lines = list(_PREAMBLE)
    names: list[str] = []
    if m is not None:
        for i, t in enumerate(m.tensors()):
            name = f"t{i}"
            names.append(name)
            make = (
                f"torch.randn({tuple(t.shape)}).to(torch.{dtype_name(t.dtype)})"
                if t.is_floating_point()
                else f"torch.zeros({tuple(t.shape)}, dtype=torch.{dtype_name(t.dtype)})"
            )
            lines.append(f"{name} = {make}.to({t.device.type!r})")
        pool = list(names)
        args = [_literal(a, pool) for a in m.args]
        args += [f"{k}={_literal(v, pool)}" for k, v in m.kwargs.items()]
    else:
        args = []
    fn = _callable_text(case, entry)
    if entry.startswith("Tensor.") and args:
        call = f"{args[0]}.{entry.split('.', 1)[1]}({', '.join(args[1:])})"
    else:
        call = f"{fn}({', '.join(args)})"
    if case.dtype:
        lines.append(f"with torch.autocast({case.device!r}, dtype=torch.{case.dtype}):")
        lines.append(f"    out = {call}")
    else:
        lines.append(f"out = {call}")
    if note:
        lines.append(f"# {note}")
    return "\n".join("    " + ln for ln in lines)


def fail(
    case: Case, what: str, m: Materialized | None = None, entry: str | None = None, **facts: Any
) -> None:
    detail = "\n".join(f"  {k}: {v}" for k, v in facts.items())
    where = f"{case.op} via {entry or case.entry or case.op} on {case.device}"
    dtype = f" under autocast({case.dtype})" if case.dtype else ""
    inputs = f"\n  inputs: {describe(list(m.args))} {describe(m.kwargs) if m.kwargs else ''}" if m else ""
    pytest.fail(
        f"{what}: {where}{dtype}{inputs}\n{detail}\n  reproduce:\n{reproduction(case, m, entry)}",
        pytrace=False,
    )


def assert_same_dtypes(
    case: Case,
    native: Outcome,
    expected: Outcome,
    m: Materialized,
    entry: str | None = None,
    plan: str = "",
    both_raise_ok: bool = False,
) -> None:
    """Native and reference outputs have the same dtypes.

    ``both_raise_ok``: for input mixes the kernel itself may refuse (promote with
    float64), native and reference raising the same exception type conforms.
    """
    both_raised = expected.error is not None and native.error is not None
    if both_raise_ok and both_raised and type(native.error) is type(expected.error):
        return
    # The kernel refuses the dtype the policy picked, natively and in the reference
    # alike (possibly only on this host): nothing about autocast can be checked here.
    skip_if_refused(native.error, expected)
    if expected.error is not None:
        fail(
            case,
            "the reference could not run this sample (fix the op catalog)",
            m,
            entry,
            reference_error=error_text(expected.error),
        )
    if native.error is not None:
        fail(
            case,
            "native autocast raised",
            m,
            entry,
            expected=expected.dtypes,
            observed=error_text(native.error),
            plan=plan,
        )
    # The aten op is compared output by output; another entry point (which may
    # return fewer outputs, e.g. a loss without its auxiliary tensors) by its result.
    got, want = native.dtypes, expected.dtypes
    if (entry is not None and entry != case.op) or expected.first_only:
        got, want = got[:1], want[:1]
    if got != want:
        fail(
            case,
            "output dtype differs from the spec",
            m,
            entry,
            expected=", ".join(want),
            observed=", ".join(got),
            plan=plan,
        )


def assert_close_outputs(
    case: Case,
    native: Outcome,
    expected: Outcome,
    m: Materialized,
    tol: Tolerance | None,
    plan: str = "",
    scratch: Sequence[int] = (),
) -> None:
    """Native equals the reference: bitwise when ``tol`` is None, else within it.

    Outputs listed in ``scratch`` (the op catalog's ``scratch_outputs``: uninitialised
    workspaces) are compared by dtype and shape only."""
    assert_same_dtypes(case, native, expected, m, plan=plan)
    got, want = native.tensors(), expected.tensors()
    if len(got) != len(want):
        fail(case, "a different number of outputs", m, expected=len(want), observed=len(got))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape:
            fail(case, f"output {i} has another shape", m, expected=list(w.shape), observed=list(g.shape))
        if i in scratch:
            continue
        mismatch = tensor_mismatch(w, g, tol, f"output {i}")
        if mismatch is not None:
            fail(
                case,
                f"output {i} differs from the reference",
                m,
                tolerance=bound(tol) + (" (same device)" if tol is None else ""),
                max_abs_error=mismatch.max_abs_error,
                dtype=dtype_name(g.dtype),
                plan=plan,
            )


def assert_untouched(
    case: Case,
    given: Sequence[str],
    arrived: Sequence[str] | None,
    m: Materialized | None,
    entry: str,
    error: BaseException | None = None,
    why: str = "",
    outputs: tuple[Sequence[str], Sequence[str]] | None = None,
) -> None:
    """The tensors arriving below Autocast kept the dtypes they were given, and (where
    ``outputs`` is known) the call's output dtypes are those it has without autocast."""
    if arrived is None:
        fail(
            case,
            f"the call never reached {entry} below Autocast",
            m,
            entry,
            error=error_text(error),
            why=why,
        )
        return
    if list(given) != list(arrived):
        fail(
            case,
            "autocast cast inputs it must leave alone",
            m,
            entry,
            given=", ".join(given),
            arrived_below_autocast=", ".join(arrived),
            rule=why,
        )
    if outputs is not None and list(outputs[0]) != list(outputs[1]):
        fail(
            case,
            "autocast changed the output dtype of a call it must leave alone (a dtype argument set?)",
            m,
            entry,
            under_autocast=", ".join(outputs[0]),
            without_autocast=", ".join(outputs[1]),
            rule=why,
        )


def assert_scenario(
    case: Case,
    what: str,
    expected: Any,
    observed: Any,
    m: Materialized | None = None,
    steps: Sequence[str] = (),
    rule: str = "",
) -> None:
    """A semantic check (cache, threads, custom functions): ``observed`` equals ``expected``.

    On failure: what differs, the inputs, the spec rule, and a reproduction whose
    comments give the scenario's steps around the call."""
    if expected == observed:
        return
    where = f"{case.op} on {case.device}" if case.op else f"autocast({case.device!r})"
    dtype = f" under autocast({case.dtype})" if case.dtype else ""
    inputs = f"\n  inputs: {describe(list(m.args))} {describe(m.kwargs) if m.kwargs else ''}" if m else ""
    scenario = "\n".join(f"    # {s}" for s in steps)
    imports = "\n".join(f"    {ln}" for ln in _PREAMBLE)
    snippet = reproduction(case, m) if case.op else f"{imports}\n{scenario}"
    if case.op and scenario:
        snippet += "\n" + scenario
    pytest.fail(
        f"{what}: {where}{dtype} [{case.variant}]{inputs}\n  rule: {rule}\n"
        f"  expected: {expected}\n  observed: {observed}\n  reproduce:\n{snippet}",
        pytrace=False,
    )

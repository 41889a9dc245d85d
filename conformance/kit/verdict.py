"""The one way a check states its expectation: :func:`expect` on an :class:`Observation`.

A check observes what the backend did and says what the spec expects, both as values
(dtype names, labels, lists or mappings of them). :func:`expect` then

* passes when they are equal (a declaration passed along that explained nothing fails, warns
  :class:`DeclarationNotObserved` or passes, as its ``if_not_observed`` says);
* reports an xfail when the spec declares exactly that observation: a known bug of this
  torch release for this check and device (``spec/rules.yaml`` ``known_bugs``: the reason
  starts ``known bug <id> (<source>)``) or of the vendor release the device file describes
  (its own ``known_bugs``), or the declaration the check passes along (a
  functorch gap, a mode divergence: the reason starts with its kind);
* fails otherwise, with what differs, the inputs, the facts the check gathered, any
  declaration for the check that did not match, and a reproduction to paste.

A check that cannot apply here (a kernel that refuses the inputs natively on this host,
a sample the transform cannot run) calls :func:`not_applicable`: a skip with its reason,
never a pass.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import pytest
import torch

from autocast_spec.known_bugs import KnownBug
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.samples import Materialized, is_operator

from ..target import Target
from .case import Case

XFAIL_PREFIX = "known bug "


class DeclarationNotObserved(UserWarning):
    """A declaration that explained nothing in this run: the check agreed with the rule.
    ``-W error::conformance.kit.verdict.DeclarationNotObserved`` makes it a failure."""


@dataclass(frozen=True)
class Declaration:
    """A spec declaration that explains an observation other than the rule's."""

    kind: str  # what it is, e.g. "declared functorch gap (op catalog functorch_gaps)"
    reason: str
    observed: tuple[str, ...] = ()  # the observations (labels) it explains; empty: any
    # when the check agrees with the rule again: "fail" (the declaration must be removed), "warn"
    # (a DeclarationNotObserved warning: it may hold elsewhere, e.g. on another host), "pass"
    if_not_observed: Literal["pass", "warn", "fail"] = "pass"
    where: str = ""  # file:line

    def explains(self, observed: Any) -> bool:
        return not self.observed or label(observed) in self.observed


@dataclass(frozen=True)
class Observation:
    """What one check saw, next to what the spec expects."""

    case: Case[Any]
    check: str  # "<category>.<check>": what a known bug names (registry.all_checks())
    what: str  # the rule, in one line, as the failure's headline
    expected: Any
    observed: Any
    inputs: Materialized | None = None
    entry: str | None = None  # the entry point called, where not the case's
    facts: Mapping[str, Any] = field(default_factory=dict)  # shown on failure (plan, rule, errors)
    steps: tuple[str, ...] = ()  # the scenario around the call, shown as comments
    declared: Declaration | None = None
    reproduce: str = ""  # replaces the generated snippet (a command) where given
    features: frozenset[str] = frozenset()  # a generated program's (what a known bug may require)
    op: str | None = None  # the op it is about, where not the case's (a generated program's output)


def label(value: Any) -> str:
    """A value as observations are declared in the spec (known bugs' ``observed``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return ", ".join(label(v) for v in value)
    if isinstance(value, Mapping):
        return "; ".join(f"{k}: {label(v)}" for k, v in value.items())
    return str(value)


def first_line(e: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def one_line(e: BaseException | None) -> str:
    """An exception as one short line: its type and the first line of its message."""
    if e is None:
        return "no error"
    return f"{type(e).__name__}: {first_line(e)[:300]}"


def not_applicable(reason: str) -> NoReturn:
    """The check cannot apply here (reported as skipped with ``reason``, never as passed)."""
    pytest.skip(reason)


def expect(target: Target, obs: Observation) -> None:
    """Pass, xfail as declared, or fail with a reproduction (see the module docstring)."""
    if obs.expected == obs.observed:
        d = obs.declared
        if d is not None and d.if_not_observed == "fail":
            _fail(
                obs,
                f"{d.where}: the declaration no longer applies ({d.kind}: "
                f"{d.reason}): the check agrees with the rule; remove it",
            )
        if d is not None and d.if_not_observed == "warn":
            case = obs.case
            warnings.warn(
                DeclarationNotObserved(
                    f"{d.where}: {d.kind} not observed: {case.op} under autocast({case.dtype_text}) on "
                    f"{case.device} agrees ({label(obs.observed)}); narrow or remove the declaration"
                ),
                stacklevel=2,
            )
        return
    bug = known_bug_for(target, obs)
    if bug is not None:
        pytest.xfail(xfail_reason(bug.id, bug.cited, bug.reason))
    if obs.declared is not None and obs.declared.explains(obs.observed):
        pytest.xfail(f"{obs.declared.kind}: {obs.declared.reason}")
    declared = (*target.spec.rules.known_bugs, *target.device_spec.known_bugs)
    notes = [
        f"declared known bug {b.id} ({b.loc}) observes: {' | '.join(b.observed)}"
        for b in declared
        if b.check == obs.check
    ]
    d = obs.declared
    if d is not None:
        notes.append(f"{d.kind} ({d.where}) observes: {' | '.join(d.observed)} ({d.reason})")
    _fail(obs, "\n  ".join(notes))


def known_bug_for(target: Target, obs: Observation) -> KnownBug | None:
    """The first known bug (torch's, then the vendor's) that explains an observation that
    differs from the rule; None: none does. What :func:`expect` reports as xfail."""
    declared = (*target.spec.rules.known_bugs, *target.device_spec.known_bugs)  # torch's, the vendor's
    dtypes = (obs.case.dtype_text, target.device_spec.default_dtype)
    seen = label(obs.observed)
    op = obs.op or obs.case.op
    return next(
        (b for b in declared if b.explains(obs.check, target.device, seen, op, obs.features, dtypes)), None
    )


def expect_each(target: Target, observations: Iterable[Observation]) -> None:
    """:func:`expect` on every observation of one test: a failure of any fails the test (the
    first one's report, with how many others failed); else a declared xfail of any is the
    test's xfail (every reason); else it passes. A declared observation never hides the
    judgement of the others."""
    failures: list[str] = []
    xfails: list[str] = []
    for obs in observations:
        try:
            expect(target, obs)
        except pytest.xfail.Exception as exc:  # before fail: pytest's XFailed is a Failed
            xfails.append(str(exc))
        except pytest.fail.Exception as exc:
            failures.append(str(exc))
    if failures:
        more = f"\n({len(failures) - 1} more observation(s) of this test failed too)" if failures[1:] else ""
        pytest.fail(failures[0] + more, pytrace=False)
    if xfails:
        pytest.xfail(" | ".join(dict.fromkeys(xfails)))


def xfail_reason(bug_id: str, source: str, reason: str) -> str:
    return f"{XFAIL_PREFIX}{bug_id} ({source}): {reason}"


def _fail(obs: Observation, note: str) -> NoReturn:
    case = obs.case
    entry = obs.entry or case.entry or case.op
    where = f"{case.op} via {entry} on {case.device}" if case.op else f"autocast({case.device!r})"
    dtype = f" under autocast({case.dtype_text})" if case.dtype else ""
    variant = f" [{case.params_label}]" if case.params_label else ""
    lines = [f"{obs.what}: {where}{dtype}{variant}"]
    if obs.inputs is not None:
        m = obs.inputs
        lines.append(f"  inputs: {describe(list(m.args))} {describe(m.kwargs) if m.kwargs else ''}".rstrip())
    lines.append(f"  expected: {label(obs.expected)}")
    lines.append(f"  observed: {label(obs.observed)}")
    lines += [f"  {k}: {label(v)}" for k, v in obs.facts.items()]
    if note:
        lines.append(f"  {note}")
    lines.append("  reproduce:")
    lines.append(
        (obs.reproduce and f"    {obs.reproduce}") or reproduction(case, obs.inputs, entry, obs.steps)
    )
    pytest.fail("\n".join(lines), pytrace=False)


def describe(v: Any) -> str:
    """Tensors as ``dtype[shape]@device``, through lists, tuples and mappings."""
    if isinstance(v, torch.Tensor):
        return f"{dtype_name(v.dtype)}{list(v.shape)}@{v.device.type}"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(describe(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {describe(x)}" for k, x in v.items()) + "}"
    return str(v) if isinstance(v, torch.dtype) else repr(v)


# What a snippet imports besides torch: the -p plugins of the run that are modules (a
# vendor's backend registers its device there). Set once per process by the plugin.
_PREAMBLE: list[str] = ["import torch"]


def set_plugins(plugins: Sequence[str], backend_modules: Sequence[str] = ()) -> None:
    """The ``-p`` plugins of this run that are modules (``no:NAME`` disables a plugin, and an
    entry-point name need not be a module: neither is imported), then the modules a vendor's
    device file names (``vendor.module``: the suite imported them)."""
    mods = [p for p in plugins if not p.startswith("no:") and _is_module(p)]
    _PREAMBLE[1:] = [f"import {m}" for m in dict.fromkeys([*mods, *backend_modules])]


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _literal(v: Any, names: list[str]) -> str:
    if isinstance(v, torch.Tensor):
        return names.pop(0)
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x, names) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(_literal(x, names) for x in v) + ",)"
    return str(v) if isinstance(v, torch.dtype) else repr(v)


def _callable_text(entry: str) -> str:
    if is_operator(entry):  # aten's, or a vendor's own (torch_ipex::nms)
        ns, _, rest = entry.partition("::")
        name, _, overload = rest.partition(".")
        return f"torch.ops.{ns}.{name}.{overload or 'default'}"
    return entry


def reproduction(case: Case[Any], m: Materialized | None, entry: str, steps: Sequence[str] = ()) -> str:
    """A snippet to paste: the call with its inputs' shapes and dtypes under ``torch.autocast``
    (where the case has an op), and the scenario's steps as comments."""
    lines = list(_PREAMBLE)
    if case.op:
        names: list[str] = []
        args: list[str] = []
        if m is not None:
            for i, t in enumerate(m.tensors()):
                names.append(f"t{i}")
                make = (
                    f"torch.randn({tuple(t.shape)}).to(torch.{dtype_name(t.dtype)})"
                    if t.is_floating_point()
                    else f"torch.zeros({tuple(t.shape)}, dtype=torch.{dtype_name(t.dtype)})"
                )
                lines.append(f"t{i} = {make}.to({t.device.type!r})")
            pool = list(names)
            args = [_literal(a, pool) for a in m.args] + [
                f"{k}={_literal(v, pool)}" for k, v in m.kwargs.items()
            ]
        if entry.startswith("Tensor.") and args:
            call = f"{args[0]}.{entry.split('.', 1)[1]}({', '.join(args[1:])})"
        else:
            call = f"{_callable_text(entry)}({', '.join(args)})"
        if case.dtype:
            lines += [f"with torch.autocast({case.device!r}, dtype={case.dtype}):", f"    out = {call}"]
        else:
            lines.append(f"out = {call}")
    lines += [f"# {s}" for s in steps]
    return "\n".join("    " + ln for ln in lines)

"""call_forms: every public entry point of ``spec/python_surface.yaml``, used in every way Python
allows and in the misuses users make, gives what the spec's ``call_forms`` and ``validation`` say.

Cases, per dtype under test, derived from the spec: each ``call_forms`` entry x every entry
point it selects (its roles, bound to a device or not, the parameters the form needs), and
each ``validation`` entry x every entry point but ``torch.autocast`` that takes its argument
(``torch.autocast``'s are the ``python_surface`` category's):

* ``arguments``: the entry point called with its parameters in another form (every one by
  keyword, one positional argument too many, an unknown keyword, a required one left out, the
  first one twice, the first two swapped), or by keyword where it takes none;
* ``value``: its positional call with one argument of the wrong kind;
* ``region``: a region object bound with ``as``, entered twice in turn, nested in itself,
  entered and left by calling ``__enter__``/``__exit__``, left without being entered, used with
  ``async with``, the class itself in ``with``, wrapped in a user's class, subclassed;
* ``decorator``: a region applied to a function, lambda, method, staticmethod, classmethod,
  ``nn.Module``, class, generator function, coroutine function, a function that calls itself,
  and to wrong targets (a tensor, None, the entry point itself not called, a classmethod object).

The region and decorator entries are forms of the region entry points bound to the device (or
to none). With ``--mode compile`` the region and decorator forms and the region entry points'
argument and value forms run again inside a compiled function (``-compile``: aot_eager,
fullgraph; what a form does under compile is Dynamo's, whatever the backend). Without the
device's runtime (policy-only) only the state entry points' argument and value forms run.

Procedure: each case is a standalone program (``reference_impl.harness.call_forms``) that
``exec`` runs, the autocast state put back after; a failure prints the program to paste. The
form's canonical program does the same work with ``with torch.autocast(device, dtype=...)`` (an
argument form: the positional call), eagerly.

Expectation: what the form observes (``out``: what the body sees, ``probe(x)``, or the call's
result) and the state it leaves are the canonical program's (``canonical``), or the same work's
with no region (``body_outside_region``), or it raises the declared error with the declared
message and leaves the state as it found it (``raises``). Under compile, the entry's
``compiled`` outcome where it states one (Dynamo's own error; a graph break, after which the
function compiled without fullgraph gives eager's outcome), else eager's.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import ClassVar

import torch

from autocast_spec.surface import STATE_ROLES, ArgumentCheck, CallForm, EntryPointInfo, Role
from reference_impl.harness.call_forms import (
    DECORATOR_TEMPLATES,
    REGION_TEMPLATES,
    Program,
    Ran,
    argument_program,
    region_programs,
    run,
)
from reference_impl.harness.devices import device_is_real
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND, Mode

from ..kit.case import Case, shown
from ..kit.category import Category
from ..kit.verdict import Observation, not_applicable, one_line
from ..target import Target

ARGUMENTS = "call_forms.arguments"
VALUE = "call_forms.value"
REGION = "call_forms.region"
DECORATOR = "call_forms.decorator"
CHECK = {"arguments": ARGUMENTS, "value": VALUE, "region": REGION, "decorator": DECORATOR}
AS_FOUND = "state as found"


@dataclass(frozen=True)
class Use:
    """A ``call_forms`` entry, or a ``validation`` entry (family ``value``), applied to one entry point."""

    declared: CallForm | ArgumentCheck
    entry: EntryPointInfo
    # the form's f(x) inside torch.compile(backend=--compile-backend, fullgraph=True)
    compiled: bool = shown("-compile", default=False)
    ID: ClassVar[str] = "{declared.family}-{entry.name}-{declared.label}{compiled}"


def _eager_only(c: CallForm) -> bool:
    template = REGION_TEMPLATES.get(c.form) or DECORATOR_TEMPLATES.get(c.form)
    return template is not None and template.eager_only


def cases(target: Target) -> list[Case]:
    surface, device = target.spec.surface, target.device
    registers = target.spec.rules.custom_ops.register_autocast_devices
    entries = [
        e
        for e in surface.entry_points
        if e.bound_to(device) or e.role in STATE_ROLES
        if e.role is not Role.REGISTRATION or device in registers
    ]
    modes = (False, True) if Mode.COMPILE in target.modes else (False,)
    params = [
        Use(c, e, compiled)
        for c in surface.call_forms
        for e in entries
        if c.selects(e)
        for compiled in modes
        if not compiled or (e.role is Role.REGION and not _eager_only(c))
    ]
    params += [
        Use(v, e, compiled)
        for v in surface.validation
        for e in entries
        if e != surface.canonical_region and v.selects(e) and v.outcome == "raises"
        for compiled in modes
        if not compiled or e.role is Role.REGION
    ]
    return [Case("call_forms", device, dtype, params=p) for dtype in target.dtypes for p in params]


CATEGORY = Category(
    "call_forms",
    __doc__,
    checks=(ARGUMENTS, VALUE, REGION, DECORATOR),
    generators=(cases,),
)


_OPS = itertools.count()


def _op_name() -> str:
    """A custom op name not registered yet (a registration program defines the op)."""
    return f"autocast_conformance::call_form_{next(_OPS)}"


def _raises(error: str | None, message: str | None) -> str:
    return f"raises {error}: ...{message}..."


def described(ran: Ran, error: str | None = None, message: str | None = None) -> str:
    """What a program did, in words: its ``out`` or its error (``error``/``message``: the
    declared one, shown as declared when it matches), then the state it left."""
    exc = ran.error
    if exc is None:
        what = f"returns {ran.out}"
    elif type(exc).__name__ == error and (message or "") in str(exc):
        what = _raises(error, message)
    else:
        what = f"raises {one_line(exc)}"
    return f"{what}; {'; '.join(ran.state) or AS_FOUND}"


@dataclass(frozen=True)
class Run:
    """The programs of one case: the form's (in its mode) and the eager ones it is judged by."""

    form: Program
    canonical: Program
    outside: Program | None
    form_without_fullgraph: Program | None  # a compiled form that graph-breaks, compiled without fullgraph


def _programs(target: Target, case: Case, p: Use) -> Run:
    device, dtype, d = target.device, case.lower, p.declared
    backend = DEFAULT_COMPILE_BACKEND if p.compiled else None
    e, canonical = p.entry, target.spec.surface.canonical_region
    assert canonical is not None, "spec/python_surface.yaml names no region the aliases are aliases of"
    if isinstance(d, ArgumentCheck):
        wrong = (d.argument, d.value)
        own = argument_program(e, canonical, "positional", device, dtype, _op_name(), backend, wrong)
        return Run(own, own, None, None)
    if d.family == "arguments":
        own = argument_program(e, canonical, d.form, device, dtype, _op_name(), backend)
        return Run(own, argument_program(e, canonical, "positional", device, dtype, _op_name()), None, None)
    ps = region_programs(d.form, e, canonical, device, dtype, backend)
    loose = region_programs(d.form, e, canonical, device, dtype, backend, False).form if backend else None
    return Run(ps.form, ps.canonical, ps.outside, loose)


def _eager_expected(outcome: str, error: str | None, message: str | None, r: Run, device: str) -> str:
    if outcome == "raises":
        return f"{_raises(error, message)}; {AS_FOUND}"
    program = r.outside if outcome == "body_outside_region" and r.outside else r.canonical
    return described(run(program, device))


def check(target: Target, case: Case[Use]) -> Observation:
    p = case.params
    assert p is not None
    e, device, declared = p.entry, target.device, p.declared
    r = _programs(target, case, p)
    expected = _eager_expected(declared.outcome, declared.error, declared.message, r, device)
    error, message = declared.error, declared.message
    under = declared.compiled if p.compiled else None
    facts = {"declared at": str(declared.loc)} if isinstance(declared, CallForm) else {}
    if under is not None:
        facts["under compile"] = under.cited
    ran = run(r.form, device)
    if under is not None and under.outcome == "raises":
        error, message = under.error, under.message
        expected = f"{_raises(error, message)}; {AS_FOUND}"
    if under is not None and under.outcome == "graph_break":
        assert r.form_without_fullgraph is not None
        expected = f"graph break ...{under.message}...; without fullgraph: {expected}"
        if isinstance(ran.error, torch._dynamo.exc.Unsupported) and under.message in str(ran.error):
            rest = described(run(r.form_without_fullgraph, device), error, message)
            observed = f"graph break ...{under.message}...; without fullgraph: {rest}"
        else:
            observed = described(ran, error, message)
    else:
        observed = described(ran, error, message)
    if isinstance(declared, ArgumentCheck):
        what = f"{e.name} given {declared.label}"
    else:
        what = f"{e.name} used as {declared.form} ({declared.family} form)"
    run_in = f"torch.compile(backend={DEFAULT_COMPILE_BACKEND!r}, fullgraph=True)" if p.compiled else "eager"
    if p.compiled:  # a known bug of the compiler names its observation so
        expected, observed = f"compiled: {expected}", f"compiled: {observed}"
    return Observation(
        case,
        CHECK[declared.family],
        f"{what}, {run_in}",
        expected,
        observed,
        facts=facts,
        reproduce=_snippet(r.form),
    )


def _snippet(program: Program) -> str:
    return "\n    ".join(program.shown().splitlines())


def check_case(target: Target, case: Case[Use]) -> Observation:
    """The check, where the device can run it (a region needs the device's runtime)."""
    p = case.params
    assert p is not None
    if p.entry.role not in STATE_ROLES and not device_is_real(target.device):
        not_applicable(
            f"{p.entry.name} ({p.entry.role}) needs the {target.device} runtime (torch.autocast disables "
            "itself without it): a policy-only run checks only the state entry points' call forms"
        )
    return check(target, case)

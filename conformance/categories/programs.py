"""programs: generated autocast programs of the shapes users deploy, compiled or exported, against
eager autocast on the same program.

The ``modes`` category runs one op, or independent ops side by side. Users deploy other shapes:
modules in eval under ``no_grad``, decorated methods, helpers several calls deep that
graph-break, nested regions, checkpoints, custom autograd Functions, higher-order ops, a second
call with another shape or autocast state. Hypothesis draws such programs from a grammar, their
ops and policies from the spec (:mod:`reference_impl.programs`).

Cases: without ``--mode``, one per dtype through torch.compile with aot_eager (the main job's
share); else per pass of the run's modes (``compile``: each ``--compile-backend``, and
inductor's default, ``emulate_precision_casts`` and ``freezing``; ``export``: strict and
non-strict, ``ep.module()`` and after ``run_decompositions()``; ``aoti``) and dtype; the cheap
passes once per dimension of the grammar (a module, a decorator, nested regions, a checkpoint,
``torch.cond``...), so that a small budget covers every dimension; a focused program also
shows its dimension in some op's output dtype (:mod:`reference_impl.programs.foci`). Each case
draws its budget (:data:`PLAN`; ``--programs N`` for a campaign) from a fixed seed. A campaign
saves the failing programs it finds in ``.hypothesis/autocast-programs``
(``AUTOCAST_PROGRAMS_DB``); copied to ``conformance/program_examples/``, every run replays
them first (none are kept today: the suite is clean on the releases it ran on).

Procedure: each program's standalone script, run eagerly under autocast and through the pass
(:func:`reference_impl.programs.run`). A program the pass cannot take (strict export of a graph
break), that eager autocast cannot run, or whose difference recurs with every region disabled
(an error, missing gradients, values: the pass's, whatever autocast does) is drawn again.

Expectation, as eager on the same program: the pass runs where eager runs; the output dtypes;
the values within the tolerance of the op that made each output; autocast's state after the
call; the gradients' dtypes; the same of a second call. A difference fails with the program's
script as its reproduction, after Hypothesis shrinks it (a time budget for that), unless a
known bug of ``spec/rules.yaml`` names the program's features (``features``): then another
program is drawn in its place (the budget is of programs no known bug covers), and the test
reports xfail with each bug met and how many programs met it.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import pytest
from hypothesis import HealthCheck, Phase, given, reject, seed, settings
from hypothesis.errors import Unsatisfiable

from reference_impl.draws import independent_of_imports
from reference_impl.harness.compare import output_mismatch
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND, Mode
from reference_impl.programs import EAGER_ERROR, NOT_APPLICABLE, CallResult, Program, Record, features, run
from reference_impl.programs.grammar import FOCI, Available
from reference_impl.programs.passes import pass_named
from reference_impl.programs.strategies import programs

from ..kit.case import Case, omitted
from ..kit.category import Category
from ..kit.divergences import DECLARED_VALUES, host_capability, largest_error
from ..kit.hypothesis import example_database
from ..kit.verdict import Declaration, Observation, expect_each, not_applicable
from ..target import Target

RUNS = "programs.runs"
OUTPUT_DTYPES = "programs.output_dtypes"
VALUES = "programs.values"
STATE = "programs.state"
GRADIENT_DTYPES = "programs.gradient_dtypes"
AS_EAGER = "as eager"
EXAMPLES = Path(__file__).resolve().parent.parent / "program_examples"  # the repository's database


@dataclass(frozen=True)
class Passes:
    """How a mode's passes draw programs: the configurations, whether each takes one focus per
    dimension (else any program), and the programs each case draws by default."""

    configs: tuple[str, ...]
    focused: tuple[str, ...]  # the configurations drawn once per dimension
    budget: int


# The passes per (mode, torch.compile backend); a vendor's backend: its default pass.
PLAN: dict[tuple[Mode, str], Passes] = {
    (Mode.COMPILE, "aot_eager"): Passes(("",), ("",), 2),
    (Mode.COMPILE, "inductor"): Passes(("", "emulate_precision_casts", "freezing"), (), 2),
    (Mode.EXPORT, DEFAULT_COMPILE_BACKEND): Passes(
        ("strict", "nonstrict", "strict-decomposed", "nonstrict-decomposed"), ("strict", "nonstrict"), 1
    ),
    (Mode.AOTI, DEFAULT_COMPILE_BACKEND): Passes(("",), (), 2),
}
VENDOR_BACKEND = Passes(("",), ("",), 2)
# A run without --mode (the main job): aot_eager, any program, this many per dtype.
WITHOUT_MODE = Passes(("",), (), 4)


@dataclass(frozen=True)
class Generated:
    """The pass programs run through, and the grammar's dimension they all hold ("": any)."""

    mode: Mode
    backend: str = omitted(DEFAULT_COMPILE_BACKEND)
    config: str = omitted("")
    focus: str = omitted("")
    WHOLE_ID: ClassVar[bool] = True
    ID: ClassVar[str] = "{mode}{backend}{config}-{dtype}{focus}"

    @property
    def pass_name(self) -> str:
        """The pass of :mod:`reference_impl.programs.passes` it names."""
        if self.mode is Mode.COMPILE:
            return f"{self.backend}-{self.config}" if self.config else self.backend
        return f"export-{self.config}" if self.mode is Mode.EXPORT else self.mode.value

    @property
    def markers(self) -> tuple[str, ...]:
        return ("slow",) if self.mode is Mode.AOTI else ()  # a C++ build per program


def available_foci(available: Available) -> tuple[str, ...]:
    """The dimensions the installed torch has (a higher-order op it lacks is none)."""
    missing = {
        "cond": not available.cond,
        "flex": not available.flex_attention,
        "nested_compile_region": not available.nested_compile_region,
    }
    return tuple(f for f in FOCI if not missing.get(f, False))


def plan(target: Target) -> Iterator[tuple[Generated, int]]:
    """Every case's parameters of the run, with its default budget."""
    if not target.compiled_modes:
        yield Generated(Mode.COMPILE), WITHOUT_MODE.budget
        return
    foci = available_foci(Available.installed())
    for mode in target.compiled_modes:
        if mode in (Mode.SCRIPT, Mode.TRACE):
            continue  # TorchScript takes no such programs (jit's limitations are its)
        for backend in target.compile_backends if mode is Mode.COMPILE else (DEFAULT_COMPILE_BACKEND,):
            how = PLAN.get((mode, backend), VENDOR_BACKEND)
            for config in how.configs:
                for focus in foci if config in how.focused else ("",):
                    p = Generated(mode, backend, config, focus)
                    if focus not in pass_named(p.pass_name).foci_out:
                        yield p, how.budget


def cases(target: Target) -> list[Case[Generated]]:
    return [
        Case("programs", target.device, dtype, params=p) for p, _ in plan(target) for dtype in target.dtypes
    ]


CATEGORY = Category(
    "programs",
    __doc__,
    checks=(RUNS, OUTPUT_DTYPES, VALUES, STATE, GRADIENT_DTYPES),
    generators=(cases,),
    mandatory_able=False,
)


def budget(target: Target, p: Generated) -> int:
    return target.programs or next(b for q, b in plan(target) if q == p)


def _kind(error: str) -> str:
    """An error as known bugs name it: ``raises <Type>: <the first line of what was raised>``,
    where a compiler's wrapper (BackendCompilerFailed) says what its backend raised."""
    kind, _, message = error.partition(":")
    inner = message.rsplit(" raised: ", 1)[-1].strip().splitlines()
    return f"raises {kind}: {inner[0][:160]}" if inner and inner[0] else f"raises {kind}"


def _tolerance_of(target: Target, op: str | None, ops: tuple[str, ...]) -> Any:
    """The tolerance of the op that made an output, else the loosest of the program's ops; under
    the loosest of the device's lower dtypes (a program's nested regions pick their own); the
    rules' default tolerance where no op made it (a residual output: a sum, a cast)."""
    known = [o for o in ((op,) if op else ops) if o in target.spec.ops] or list(ops)
    dtypes = target.device_spec.lower_dtypes
    tols = [t for o in known for d in dtypes if (t := target.spec.tolerance(o, d)) is not None]
    tols = tols or [t for d in dtypes if (t := target.spec.rules.default_tolerance.get(d))]
    return max(tols, key=lambda t: (t.atol, t.rtol)) if tols else None


class Difference(NamedTuple):
    """One way a pass's run differs from eager's."""

    check: str
    what: str  # the rule, as the failure's headline
    observed: str  # a label, as known bugs declare it
    facts: dict[str, Any]
    op: str | None = None  # the op whose output differs, where one did (a known bug's ops)
    declared: Declaration | None = None  # a value bound of spec/compiled.yaml it stays within


def _call(
    target: Target, case: Case[Generated], record: Record, eager: CallResult, got: CallResult, which: str
) -> Iterator[Difference]:
    """(check, what, observed, facts) of one call's differences from eager (none: it agrees)."""
    if got.error and not eager.error:
        yield Difference(RUNS, f"the {which} raised where eager ran", _kind(got.error), {"error": got.error})
        return
    if eager.dtypes != got.dtypes:
        facts: dict[str, Any] = {
            f"{o.value} ({o.op or 'residual'})": f"eager {e}, pass {g}"
            for o, e, g in zip(record.outputs, eager.dtypes, got.dtypes, strict=False)
            if e != g
        }
        facts = facts or {"eager": list(eager.dtypes), "pass": list(got.dtypes)}
        made_by = {o.op for o, e, g in zip(record.outputs, eager.dtypes, got.dtypes, strict=False) if e != g}
        op = made_by.pop() if len(made_by) == 1 else None  # what a known bug's ops are matched with
        yield Difference(
            OUTPUT_DTYPES,
            f"the {which}'s output dtypes differ from eager's",
            "output dtypes differ",
            facts,
            op,
        )
    else:
        ops = tuple(o.op for o in record.outputs if o.op)
        for o, e, g in zip(record.outputs, eager.outputs, got.outputs, strict=False):
            tol = _tolerance_of(target, o.op, ops)
            wrong = output_mismatch([e], [g], tol, ())
            if wrong is not None:
                diff = {"output": f"{o.value} ({o.op or 'residual'})", "difference": str(wrong)}
                what = f"the {which}'s values differ from eager's"
                yield _within_bound(target, case, o.op, largest_error([e], [g], ()), diff, what)
                break
    if eager.state != got.state:
        fields = [f for f in ("enabled", "dtype", "cache_enabled", "nesting")
                  if getattr(eager.state, f) != getattr(got.state, f)]  # fmt: skip
        states = {"eager": str(eager.state), "pass": str(got.state)}
        yield Difference(
            STATE, f"autocast's state after the {which}", f"state differs: {', '.join(fields)}", states
        )


def value_gaps(target: Target, record: Record) -> dict[str, float]:
    """The outputs whose values differ beyond their tolerance (:func:`_call`'s check, declarations
    aside) with the largest error: what :func:`reference_impl.programs.run` compares bare."""
    eager, got, gaps = record.eager, record.got, dict[str, float]()
    if eager is None or got is None or got.pass_error:
        return gaps
    second = (eager.second, got.second) if record.second_not_applicable is None else (None, None)
    ops = tuple(o.op for o in record.outputs if o.op)
    for which, e, g in (("call", eager.first, got.first), ("second call", *second)):
        if e is None or g is None or e.error or g.error or e.dtypes != g.dtypes:
            continue
        for o, a, b in zip(record.outputs, e.outputs, g.outputs, strict=False):
            if output_mismatch([a], [b], _tolerance_of(target, o.op, ops), ()) is not None:
                gaps[f"{which} {o.value}[{o.index}] {a.dtype}"] = largest_error([a], [b], ())
    return gaps


def _within_bound(
    target: Target, case: Case[Generated], op: str | None, error: float, facts: dict[str, Any], what: str
) -> Difference:
    """A values difference of ``op``'s output: declared in ``spec/compiled.yaml``
    ``value_divergences`` for the pass (any input kind) and within its bound, else a failure."""
    p = case.params
    assert p is not None
    kind = {"strict": "strict", "nonstrict": "non-strict"}.get(p.config.split("-")[0], "")
    mode, backend = p.mode.value, p.backend if p.mode is Mode.COMPILE else kind
    config = "decomposed" if p.config.endswith("decomposed") else p.config if p.mode is Mode.COMPILE else ""
    declared = next(
        (
            d
            for d in target.spec.value_divergences
            if d.inputs is None
            and d.covers(mode, backend, config or "default", op or "", case.dtype_text, "")
            and d.holds_on(host_capability())
        ),
        None,
    )
    if declared is None:
        return Difference(VALUES, what, "values differ", facts, op)
    facts = {
        **facts,
        "max abs error": f"{error:.3g}",
        "declared bound": f"{declared.max_error} ({declared.loc})",
    }
    if error > declared.max_error:
        return Difference(VALUES, what, "values differ beyond the declared bound", facts, op)
    within = f"values differ within the declared bound {declared.max_error}"
    why = f"{declared.reason} ({declared.cited})"
    return Difference(
        VALUES, what, within, facts, op, Declaration(DECLARED_VALUES, why, (within,), where=str(declared.loc))
    )


def observations(target: Target, case: Case[Generated], record: Record) -> list[Observation]:
    """Every difference of the pass's run from eager's, as an observation (none: as eager)."""
    assert record.eager is not None and record.got is not None and case.params is not None
    eager, got = record.eager, record.got
    found: list[Difference] = []
    if got.pass_error:  # eager ran its first call (its backward may have raised): judged ones only
        error = got.pass_error
        found.append(Difference(RUNS, "the pass failed where eager ran", _kind(error), {"error": error}))
    elif eager.first is not None and got.first is not None:
        found += _call(target, case, record, eager.first, got.first, "call")
        if record.gradients_apply and eager.gradients is not None and not found:
            if got.gradients_error:
                error = got.gradients_error
                found.append(
                    Difference(RUNS, "backward raised where eager's ran", _kind(error), {"error": error})
                )
            elif got.gradients != eager.gradients:
                facts = {"eager": dict(eager.gradients), "pass": dict(got.gradients or {})}
                found.append(Difference(GRADIENT_DTYPES, "gradient dtypes", "gradient dtypes differ", facts))
        e2, g2 = eager.second, got.second
        if not found and e2 is not None and g2 is not None and record.second_not_applicable is None:
            found += [
                d._replace(observed=f"second call: {d.observed}")
                for d in _call(target, case, record, e2, g2, "second call")
            ]
    held = features(record.program) | {f"pass:{case.params.pass_name}"}
    where = f"{case.params.pass_name} (autocast {case.dtype_text})"
    reproduce = "\n    ".join(
        ["python program.py  # the program, eagerly and through the pass:", *record.script.splitlines()]
    )
    return [
        Observation(
            case,
            d.check,
            f"{where}: {d.what}",
            AS_EAGER,
            d.observed,
            facts=d.facts,
            reproduce=reproduce,
            features=held,
            op=d.op,
            declared=d.declared,
        )
        for d in found
    ]


def check(target: Target, case: Case[Generated]) -> None:
    """Draw the case's budget of programs and judge each (see the module docstring): a failure
    fails with the shrunk program's script; a program that meets a known bug is counted and
    another drawn in its place (as one the pass cannot take is), and the bugs met make the
    test an xfail."""
    p = case.params
    assert p is not None
    if target.policy_only:
        not_applicable("--policy-only: a generated program needs the backend's kernels")
    met: collections.Counter[str] = collections.Counter()
    judged: dict[Program, Record] = {}
    failed_at: list[float] = []
    strategy = programs(
        target.spec,
        target.device,
        case.dtype_text,
        focus=p.focus or ("frozen" if p.config == "freezing" else None),
        inference_only=pass_named(p.pass_name).inference_only,
        observable=p.mode is Mode.COMPILE,
    )
    seed_of = int(hashlib.sha256(case.id.encode()).hexdigest()[:12], 16)

    @settings(
        max_examples=budget(target, p),
        deadline=None,
        database=example_database(EXAMPLES, campaign=bool(target.programs)),
        suppress_health_check=list(HealthCheck),
        print_blob=True,
        phases=[f for f in settings().phases if f is not Phase.shrink or target.programs_shrink > 0],
    )
    @given(strategy)
    def one(program: Program) -> None:
        record = judged.get(program)
        if record is None:
            if failed_at and time.monotonic() - failed_at[0] > target.programs_shrink:
                return  # shrinking's time is up: the smallest failing program so far is reported
            gaps = functools.partial(value_gaps, target)
            record = judged[program] = run(program, p.pass_name, target.spec, value_gaps=gaps)
        if record.status in (NOT_APPLICABLE, EAGER_ERROR):
            reject()  # the pass cannot take it, or eager autocast cannot run it: draw another
        try:
            expect_each(target, observations(target, case, record))
        except pytest.xfail.Exception as declared:
            met[str(declared)] += 1
            reject()  # counted, and another drawn: the budget is of programs no known bug covers
        except BaseException:
            failed_at[:] = failed_at or [time.monotonic()]
            raise

    one.hypothesis.inner_test._hypothesis_internal_add_digest = case.id.encode()  # type: ignore[attr-defined]
    runner = one if target.programs else seed(seed_of)(one)
    try:
        with independent_of_imports():
            runner()
    except Unsatisfiable:
        if not met:
            not_applicable(f"no drawn program of this focus could be judged through {p.pass_name}")
    if met:
        bugs = "; ".join(f"{n} program(s): {reason}" for reason, n in met.items())
        pytest.xfail(f"generated programs met declared known bugs: {bugs}")

"""modes: every catalogued op of the backend in each selected execution mode against eager autocast.

Cases (``--mode`` other than eager): per mode and pass of the mode (``compile``: each
``--compile-backend``, and with inductor its default configuration and
``emulate_precision_casts``; ``export``: ``ep.module()`` and the program after
``run_decompositions()``), dtype under test and listed op with samples, the first sample with
float32 inputs and with inputs already in the autocast dtype.

Procedure: the call under ``torch.autocast`` eagerly and in the mode
(:mod:`reference_impl.modes`). ``compile``, ``export`` and ``aoti`` run every op of one
(pass, dtype, input kind) as one program (a batch: one compile, not one per op); ``export``
exports it strictly and non-strictly. ``script`` and ``trace`` run each call alone.

Expectation: the same output dtypes as eager, or the difference ``mode_divergences`` declares
for the op, dtype and inputs (:mod:`conformance.kit.divergences`: an xfail with the reason,
counted in the terminal summary; a declaration that no longer diverges fails); then, for
deterministic ops, the same values within the op's tolerance (bitwise under
``emulate_precision_casts``), or within a declared bound. ``export`` also keeps the region as
the autocast higher-order op in ``ep.module()`` and leaves none after ``run_decompositions()``.
Where eager autocast raises because the kernel refuses the inputs natively on this host, the
check is not applicable (in every mode alike); where the raw call runs, eager autocast itself fails.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch

from reference_impl.harness.samples import Materialized, materialize
from reference_impl.modes.aoti import BACKEND as AOTI_BACKEND
from reference_impl.modes.aoti import aoti_runner
from reference_impl.modes.batch import INDUCTOR_CONFIGS, Call, Config, Pass, batch_outcomes, compiled_runner
from reference_impl.modes.export import HOP_NAME, KINDS, Exported, export_runner
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND, Mode, fresh_in_mode, run_in_mode

from ..kit.calls import run_oracle
from ..kit.case import Case, MixEntry, MixRole, omitted
from ..kit.category import Category
from ..kit.divergences import (
    Run,
    declaration,
    divergence_hint,
    find_divergence,
    observed_label,
    values_observation,
)
from ..kit.inputs import resolve_mix
from ..kit.refusal import intercept_only, kernel_gap, skip_if_refused
from ..kit.verdict import Observation, not_applicable, one_line
from ..target import Target

MATCHES_EAGER = "modes.matches_eager"
INPUTS: tuple[MixEntry, ...] = (torch.float32, MixRole.LOWER)


@dataclass(frozen=True)
class InMode:
    """The mode, its pass (torch.compile's backend, a configuration), and the op's input kind
    (float32, or the autocast dtype)."""

    mode: Mode
    backend: str = omitted(DEFAULT_COMPILE_BACKEND)  # torch.compile's (mode compile only)
    config: Config = omitted(Config.DEFAULT)
    inputs: MixEntry = torch.float32
    WHOLE_ID: ClassVar[bool] = True
    ID: ClassVar[str] = "{mode}{backend}{config}-{op}-{dtype}-{inputs}"

    @property
    def markers(self) -> tuple[str, ...]:
        return ("slow",) if self.mode is Mode.AOTI else ()  # a C++ build per batch, minutes cold


def passes(mode: Mode, backend: str) -> tuple[Config, ...]:
    """The configurations a mode is checked under: inductor also rounds as eager does; export's
    program is also judged decomposed."""
    if mode is Mode.EXPORT:
        return (Config.DEFAULT, Config.DECOMPOSED)
    return INDUCTOR_CONFIGS if mode is Mode.COMPILE and backend == "inductor" else (Config.DEFAULT,)


def mode_passes(target: Target) -> Iterator[tuple[Mode, str, Config]]:
    """Every pass of the run's modes other than eager: (mode, torch.compile's backend, config)."""
    for mode in target.compiled_modes:
        for backend in target.compile_backends if mode is Mode.COMPILE else (DEFAULT_COMPILE_BACKEND,):
            for config in passes(mode, backend):
                yield mode, backend, config


def cases(target: Target) -> list[Case[InMode]]:
    return [
        Case("modes", target.device, dtype, op=op, entry=op, params=InMode(mode, backend, config, inputs))
        for mode, backend, config in mode_passes(target)
        for dtype in target.dtypes
        for op in sorted(target.device_spec.ops)
        if target.spec.op_info(op) is not None and target.selects(op)
        for inputs in INPUTS
    ]


CATEGORY = Category(
    "modes",
    __doc__,
    checks=(MATCHES_EAGER,),
    generators=(cases,),
    mandatory_able=False,
)

SCOPE = re.compile(
    r"test_mode_matches_eager\[(?P<pass>[\w-]+)-[\w.]+::[\w.]+-(?P<dtype>\w+)-(?P<inputs>\w+)\]$"
)


GRAD_SCOPE = re.compile(
    r"test_mode_gradients_match_eager\[(?P<pass>grad(?:-\w+)?)-[\w.]+::[\w.]+-(?P<dtype>\w+)-(?P<variant>\w+)\]$"
)


def batch_scope(nodeid: str) -> str:
    """The batch a test's node id belongs to (``compile-bfloat16-float32``; ``mode_gradients``'
    ``grad-inductor-bfloat16-region``), else the id itself: a distributed run sends each batch's
    tests to one worker, which compiles it once (xdist schedules by node id: the one place an id
    is read back)."""
    g = GRAD_SCOPE.search(nodeid)
    if g is not None:
        return f"{g['pass']}-{g['dtype']}-{g['variant']}"
    m = SCOPE.search(nodeid)
    if m is None or not m["pass"].startswith(("compile", "export", "aoti")):
        return nodeid
    pass_ = "export" if m["pass"].startswith("export") else m["pass"]  # both passes: one program
    return f"{pass_}-{m['dtype']}-{m['inputs']}"


def params(case: Case[InMode]) -> tuple[InMode, torch.dtype]:
    assert case.params is not None and case.dtype is not None
    return case.params, case.dtype


def inputs_of(target: Target, case: Case[InMode]) -> Materialized:
    p, lower = params(case)
    info = target.spec.op_info(case.op)
    assert info is not None
    return materialize(info.samples[0], resolve_mix((p.inputs,), lower)[0], target.device)


def backend_of(p: InMode) -> str:
    """The compiler the case's run names in the declarations (export: its kinds')."""
    return {Mode.COMPILE: p.backend, Mode.AOTI: AOTI_BACKEND}.get(p.mode, DEFAULT_COMPILE_BACKEND)


def run_alone(target: Target, case: Case[InMode], mode: Mode) -> Any:
    """The op's call alone in ``mode`` (its result, or its error)."""
    p, lower = params(case)
    m, backend = inputs_of(target, case), backend_of(p)
    try:
        if mode is Mode.COMPILE:  # a graph of its own, built under the pass's configuration
            how = Pass(backend, p.config)
            with how.configured():
                call = fresh_in_mode(
                    mode, case.op, m.args, m.kwargs, device=target.device, dtype=lower, backend=backend
                )
                return call()
        return run_in_mode(
            mode, case.op, m.args, m.kwargs, device=target.device, dtype=lower, backend=backend
        )
    except Exception as exc:  # a mode's failure is an observation ("error")
        return exc


# the ids of the cases the run selected (set after collection): a batch holds only those
SELECTED: set[str] = set()


def batch_calls(target: Target, case: Case[InMode], backend: str) -> list[Call]:
    """The calls of the case's batch: every op of its dtype and input kind that the run selected
    (all where nothing was recorded) and that can join it: not where it cannot run
    (intercept-only, a kernel gap, eager autocast raises) nor where the mode is declared to fail."""
    p, lower = params(case)
    others = [
        replace(case, op=op, entry=op) for op in sorted(target.device_spec.ops) if target.spec.op_info(op)
    ]

    def joins(c: Case[InMode]) -> bool:
        if intercept_only(target, c.op) or kernel_gap(target, c.op, lower):
            return False
        d = find_divergence(target.spec, Run(p.mode, backend, p.config, lower, c.op, p.inputs))
        if d is not None and d.observed == "error":
            return False
        return not isinstance(run_alone(target, c, Mode.EAGER), BaseException)

    return [
        Call(c.op, functools.partial(inputs_of, target, c))
        for c in others
        if (not SELECTED or c.id in SELECTED) and joins(c)
    ]


def in_batch(target: Target, case: Case[InMode], backend: str, runner: Callable[..., Sequence[Any]]) -> Any:
    """The op's share of its batch's run (or the error of the smallest batch holding it that
    failed); an op that joined no batch (declared to fail) runs alone, so that a declaration
    that no longer holds shows."""
    p, lower = params(case)
    key = (p.mode, backend, p.config if p.mode is Mode.COMPILE else None, target.device, lower, p.inputs)
    outcomes = batch_outcomes(key, lambda: batch_calls(target, case, backend), target.device, lower, runner)
    if case.op in outcomes:
        return outcomes[case.op]
    alone = [Call(case.op, lambda: inputs_of(target, case))]
    return batch_outcomes((*key, case.op), lambda: alone, target.device, lower, runner)[case.op]


def reproduction(target: Target, case: Case[InMode], backend: str) -> str:
    mode = params(case)[0].mode
    compiler = f" --compile-backend {backend}" if mode is Mode.COMPILE else ""
    return f"pytest conformance --backend {target.device} --mode {mode.value}{compiler} -k '{case.id}'"


def eager_result(target: Target, case: Case[InMode]) -> Any:
    """Eager autocast's result for the case: not applicable where the op cannot run here, an
    :class:`Observation` where eager autocast itself fails, else the result (or its error)."""
    p, lower = params(case)
    if target.policy_only:
        not_applicable("--policy-only: script/trace/compile/export need the backend's kernels")
    why = intercept_only(target, case.op) or kernel_gap(target, case.op, lower)
    if why:
        not_applicable(why)
    eager = run_alone(target, case, Mode.EAGER)
    if isinstance(eager, BaseException):
        raw = run_oracle(target, lower, case.op, inputs_of(target, case))
        skip_if_refused(eager, raw)
        if raw.error is None:
            return Observation(
                case,
                MATCHES_EAGER,
                f"{p.mode.value}: eager autocast raised but the call without autocast on the reference's "
                "cast inputs runs: eager autocast itself fails",
                "eager runs",
                one_line(eager),
                reproduce=reproduction(target, case, backend_of(p)),
            )
    return eager


def judge(target: Target, case: Case[InMode], run: Run, eager: Any, got: Any, where: str) -> Observation:
    """``got`` (the op's result in the mode, or its error) against ``eager``: the output dtypes
    as eager's or as declared, then the values (``where``: the pass, in the headline)."""
    reproduce = reproduction(target, case, run.backend)
    declared = declaration(run, find_divergence(target.spec, run))
    facts = {f"{where} raised": one_line(got)} if isinstance(got, BaseException) else {}
    if not declared:
        facts["if intended"] = divergence_hint(run, got)
    inputs = run.fields.get("inputs")
    dtypes = Observation(
        case,
        MATCHES_EAGER,
        f"{where} gives other output dtypes than eager autocast ({inputs} inputs)",
        observed_label(eager),
        observed_label(got),
        facts=facts,
        declared=declared,
        reproduce=reproduce,
    )
    info = target.spec.op_info(case.op)
    if dtypes.expected != dtypes.observed or declared or isinstance(eager, BaseException):
        return dtypes
    assert info is not None
    if info.nondeterministic:
        return dtypes
    tolerance = None if run.config is Config.EMULATE else target.spec.tolerance(case.op, case.dtype_text)
    where = f"{where} {case.op} (autocast {case.dtype_text}, {inputs} inputs)"
    return values_observation(
        target.spec, run, case, MATCHES_EAGER, where, eager, got, tolerance, info.scratch_outputs, reproduce
    )


def exported(target: Target, case: Case[InMode], eager: Any) -> list[Observation]:
    """Per export kind: the region kept as the HOP (``default``) or gone (``decomposed``), then
    the program's output dtypes and values against eager autocast."""
    p, lower = params(case)
    seen = []
    for kind in KINDS:
        got = in_batch(target, case, kind, export_runner(kind == "strict", target.device, lower))
        decomposed = p.config is Config.DECOMPOSED
        where = f"{kind} export" + (", run_decompositions()" if decomposed else ", ep.module()")
        if isinstance(got, Exported):
            left = "no HOP left" if not got.hops_left else f"{got.hops_left} {HOP_NAME} left"
            region = ("no HOP left", left) if decomposed else ("ok", got.region)
            what = f"{where}: the autocast region as the {HOP_NAME} higher-order op"
            reproduce = reproduction(target, case, kind)
            seen.append(Observation(case, MATCHES_EAGER, what, *region, reproduce=reproduce))
            got = got.decomposed_out if decomposed else got.module_out
        seen.append(
            judge(target, case, Run(p.mode, kind, p.config, lower, case.op, p.inputs), eager, got, where)
        )
    return seen


def matches_eager(target: Target, case: Case[InMode]) -> list[Observation]:
    """The op in the case's mode and pass against eager autocast."""
    eager = eager_result(target, case)
    if isinstance(eager, Observation):
        return [eager]
    p, lower = params(case)
    if p.mode is Mode.EXPORT:
        return exported(target, case, eager)
    backend = backend_of(p)
    run = Run(p.mode, backend, p.config, lower, case.op, p.inputs)
    if p.mode is Mode.AOTI:
        where = "aoti (non-strict export, AOTInductor package)"
        return [judge(target, case, run, eager, in_batch(target, case, backend, aoti_runner), where)]
    if p.mode is Mode.COMPILE:
        got = in_batch(target, case, backend, compiled_runner(Pass(backend, p.config)))
        return [judge(target, case, run, eager, got, f"compile ({backend}, {p.config.value})")]
    return [judge(target, case, run, eager, run_alone(target, case, p.mode), p.mode.value)]

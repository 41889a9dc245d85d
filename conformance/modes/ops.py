"""Every catalogued op of the backend in a mode against eager autocast (``test_modes.py``).

Cases: per selected mode other than eager, dtype under test and listed op with samples,
the first sample with float32 inputs and with inputs already in the autocast dtype.

Procedure: the call under ``torch.autocast`` eagerly and through the mode
(:func:`~conformance.modes.run.run_in_mode`).
Expectation: the same output dtypes, or the difference ``mode_divergences`` declares for the
op, dtype and inputs (in ``spec/jit.yaml`` or ``spec/compiled.yaml``, :func:`divergence_file`;
an xfail with the reason, counted in the terminal summary; a declaration that no longer
diverges fails); then, for deterministic ops, the same values within the op's tolerance.
Where eager autocast raises because the kernel refuses the inputs natively on this host, the
check is not applicable (in every mode alike); where the raw call runs, eager autocast itself fails.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any

import torch

from autocast_spec.model import Divergence, Spec
from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.harness.samples import Materialized, materialize, output_tensors

from ..kit.case import Case
from ..kit.refusal import intercept_only, kernel_gap, raw_call, skip_if_refused
from ..kit.verdict import Declaration, Observation, not_applicable, one_line
from ..target import Target
from .batch import CONFIGS, DEFAULT_CONFIG, EMULATE, Call, Pass, batch_outcomes, compiled_runner
from .run import DEFAULT_COMPILE_BACKEND, fresh_in_mode, run_in_mode
from .values import find_value_divergence, values_observation

MATCHES_EAGER = "modes.matches_eager"
INPUTS = ("float32", "lower")
DECLARED = "declared divergence: "  # the xfail reason's prefix, counted in the terminal summary


@dataclass(frozen=True)
class ModeCase:
    """One op's first sample in one mode, under one dtype, with float32 or lower inputs."""

    mode: str
    op: str
    dtype: str
    inputs: str  # float32 | lower
    config: str = DEFAULT_CONFIG  # the compiler's pass (batch.CONFIGS)

    @property
    def id(self) -> str:
        pass_ = "" if self.config == DEFAULT_CONFIG else f"-{self.config}"
        return f"{self.mode}{pass_}-{self.op}-{self.dtype}-{self.inputs}"


SCOPE = re.compile(
    r"test_mode_matches_eager\[(?P<pass>[\w-]+)-[\w.]+::[\w.]+-(?P<dtype>\w+)-(?P<inputs>\w+)\]$"
)


def batch_scope(nodeid: str) -> str:
    """The batch a test's node id belongs to (``compile-bfloat16-float32``), else the id itself:
    a distributed run sends each batch's tests to one worker, which compiles it once."""
    m = SCOPE.search(nodeid)
    if m is None or not m["pass"].startswith(("compile", "export", "aoti")):
        return nodeid
    pass_ = "export" if m["pass"].startswith("export") else m["pass"]  # both passes: one program
    return f"{pass_}-{m['dtype']}-{m['inputs']}"


def passes(mode: str, backend: str) -> tuple[str, ...]:
    """The configurations a mode is checked under: inductor also rounds as eager does."""
    if mode == "export":
        return (DEFAULT_CONFIG, "decomposed")
    return CONFIGS if mode == "compile" and backend == "inductor" else (DEFAULT_CONFIG,)


def mode_cases(
    target: Target, modes: tuple[str, ...], backend: str = DEFAULT_COMPILE_BACKEND
) -> list[ModeCase]:
    return [
        ModeCase(mode, op, dtype, inputs, config)
        for mode in modes
        if mode != "eager"
        for config in passes(mode, backend)
        for dtype in target.dtypes
        for op in sorted(target.device_spec.ops)
        if target.spec.op_info(op) is not None and target.selects(op)
        for inputs in INPUTS
    ]


def observed_label(result: Any) -> str:
    """What a run produced, as the spec writes it: output dtypes (comma-joined) or ``error``."""
    if isinstance(result, BaseException):
        return "error"
    names = [dtype_name(t.dtype) for t in output_tensors(result)]
    return ",".join(names) if names else "no-tensor"


def find_divergence(
    spec: Spec, mode: str, op: str, dtype: str, inputs: str, backend: str | None = None
) -> Divergence | None:
    """The declared divergence of ``op`` in ``mode`` (under ``backend``, where the mode compiles)."""
    entry = spec.mode_divergences.get(mode)
    found = [
        d
        for d in (entry.divergences if entry else ())
        if d.op == op and d.dtype in (None, dtype) and d.inputs == inputs and d.backend in (None, backend)
    ]
    # an entry for this very backend before one for every backend
    return next((d for d in found if d.backend is not None), found[0] if found else None)


def divergence_file(mode: str, backend: str) -> str:
    """Where a mode's dtype divergences are declared: TorchScript, trace and the non-compiling
    ``torch.compile`` backends in spec/jit.yaml; a compiler (inductor, a vendor's), export and
    AOTInductor in spec/compiled.yaml."""
    if mode in ("script", "trace") or (mode == "compile" and backend in ("eager", "aot_eager")):
        return "spec/jit.yaml"
    return "spec/compiled.yaml"


def declaration(mc: ModeCase, d: Divergence | None, backend: str = "") -> Declaration | None:
    """A declared divergence as the verdict's declaration: it explains exactly its observation
    and must fail once the mode agrees with eager again."""
    if d is None:
        return None
    when = f" [condition: {d.condition}]" if d.condition else ""
    where = f"{mc.mode} {mc.op} (autocast {mc.dtype}, {mc.inputs} inputs)"
    return Declaration(
        f"{DECLARED}{where}",
        f"{d.observed_under(mc.dtype)} instead of eager: {d.reason}{when}"
        + (f" ({d.source})" if d.source else ""),
        (d.observed_under(mc.dtype),),
        if_not_observed="fail",
        where=str(d.loc) if d.loc else f"{divergence_file(mc.mode, backend)} mode_divergences.{mc.mode}",
    )


def inputs_of(target: Target, mc: ModeCase) -> Materialized:
    info = target.spec.op_info(mc.op)
    assert info is not None
    float_dtype = torch.float32 if mc.inputs == "float32" else dtype_of(mc.dtype)
    return materialize(info.samples[0], float_dtype, target.device)


def _run(mode: str, target: Target, mc: ModeCase, backend: str) -> Any:
    m = inputs_of(target, mc)
    try:
        if mode == "compile":  # a graph of its own, built under the pass's configuration
            how = Pass(backend, mc.config)
            with how.configured():
                call = fresh_in_mode(
                    mode,
                    mc.op,
                    m.args,
                    m.kwargs,
                    device=target.device,
                    dtype=dtype_of(mc.dtype),
                    backend=backend,
                )
                return call()
        return run_in_mode(
            mode, mc.op, m.args, m.kwargs, device=target.device, dtype=dtype_of(mc.dtype), backend=backend
        )
    except Exception as exc:  # a mode's failure is an observation ("error")
        return exc


def batchable(target: Target, mc: ModeCase, backend: str) -> bool:
    """Does the op join its dtype's batch? Not where it cannot run (intercept-only, a kernel
    gap, eager autocast raises) nor where the mode is declared to fail on it."""
    if intercept_only(target, mc.op) or kernel_gap(target, mc.op, mc.dtype):
        return False
    d = find_divergence(target.spec, mc.mode, mc.op, mc.dtype, mc.inputs, backend)
    if d is not None and d.observed == "error":
        return False
    return not isinstance(_run("eager", target, mc, DEFAULT_COMPILE_BACKEND), BaseException)


# the ids of the cases the run selected (set after collection): a batch holds only those
SELECTED: set[str] = set()


def batch_calls(target: Target, mc: ModeCase, backend: str) -> list[Call]:
    """The calls of ``mc``'s batch: every batchable op of its dtype and input kind that the run
    selected (all where nothing was recorded)."""
    cases = [
        replace(mc, op=op) for op in sorted(target.device_spec.ops) if target.spec.op_info(op) is not None
    ]
    return [
        Call(c.op, functools.partial(inputs_of, target, c))
        for c in cases
        if (not SELECTED or c.id in SELECTED) and batchable(target, c, backend)
    ]


def _in_mode(target: Target, mc: ModeCase, backend: str) -> Any:
    """The op's result in the mode: compiled in its batch where it joined one, else alone."""
    if mc.mode == "compile":
        how = Pass(backend, mc.config)
        key = (mc.mode, how, target.device, mc.dtype, mc.inputs)
        outcomes = batch_outcomes(
            key,
            lambda: batch_calls(target, mc, backend),
            target.device,
            dtype_of(mc.dtype),
            compiled_runner(how),
        )
        if mc.op in outcomes:
            return outcomes[mc.op]
    return _run(mc.mode, target, mc, backend)


def reproduction(target: Target, mc: ModeCase, backend: str) -> str:
    compiler = f" --compile-backend {backend}" if mc.mode == "compile" else ""
    return f"pytest conformance --backend {target.device} --mode {mc.mode}{compiler} -k '{mc.id}'"


def eager_result(target: Target, mc: ModeCase, backend: str) -> Any:
    """Eager autocast's result for the case: not applicable where the op cannot run here, an
    :class:`Observation` where eager autocast itself fails, else the result (or its error)."""
    if target.policy_only:
        not_applicable("--policy-only: script/trace/compile/export need the backend's kernels")
    why = intercept_only(target, mc.op) or kernel_gap(target, mc.op, mc.dtype)
    if why:
        not_applicable(why)
    eager = _run("eager", target, mc, backend)
    if isinstance(eager, BaseException):
        raw = raw_call(target, dtype_of(mc.dtype), mc.op, inputs_of(target, mc))
        skip_if_refused(eager, raw)
        if raw.error is None:
            return Observation(
                Case("jit", target.device, mc.dtype, op=mc.op, entry=mc.op),
                MATCHES_EAGER,
                f"{mc.mode}: eager autocast raised but the call without autocast on the reference's "
                "cast inputs runs: eager autocast itself fails",
                "eager runs",
                one_line(eager),
                reproduce=reproduction(target, mc, backend),
            )
    return eager


def matches_eager(target: Target, mc: ModeCase, backend: str) -> Observation:
    eager = eager_result(target, mc, backend)
    if isinstance(eager, Observation):
        return eager
    return judge(target, mc, backend, eager, _in_mode(target, mc, backend))


def judge(target: Target, mc: ModeCase, backend: str, eager: Any, got: Any, where: str = "") -> Observation:
    """``got`` (the op's result in the mode, or its error) against ``eager``: the output dtypes
    as eager's or as declared, then the values (``where``: the pass, in the headline).
    ``backend``: the compiler (``--compile-backend``; the export kind under ``export``)."""
    case = Case("jit", target.device, mc.dtype, op=mc.op, entry=mc.op)
    reproduce = reproduction(target, mc, backend)
    where = where or (f"{mc.mode} ({backend}, {mc.config})" if mc.mode == "compile" else mc.mode)
    found = find_divergence(target.spec, mc.mode, mc.op, mc.dtype, mc.inputs, backend)
    declared = declaration(mc, found, backend)
    facts = {f"{where} raised": one_line(got)} if isinstance(got, BaseException) else {}
    if not declared:
        facts["if intended"] = (
            f"add to {divergence_file(mc.mode, backend)} mode_divergences.{mc.mode}: {{op: {mc.op}, "
            f"dtype: {mc.dtype}, inputs: {mc.inputs}, "
            + (f"backend: {backend}, " if mc.mode == "compile" else "")
            + f"observed: {observed_label(got)}, reason: ..., source: <link> or none, seen_on: "
            f"{torch.__version__.split('+')[0]}}}"
        )
    dtypes = Observation(
        case,
        MATCHES_EAGER,
        f"{where} gives other output dtypes than eager autocast ({mc.inputs} inputs)",
        observed_label(eager),
        observed_label(got),
        facts=facts,
        declared=declared,
        reproduce=reproduce,
    )
    info = target.spec.op_info(mc.op)
    if dtypes.expected != dtypes.observed or declared or isinstance(eager, BaseException):
        return dtypes
    assert info is not None
    if info.nondeterministic:
        return dtypes
    tolerance = None if mc.config == EMULATE else target.spec.tolerance(mc.op, mc.dtype)
    return values_observation(
        case,
        MATCHES_EAGER,
        f"{where} {mc.op} (autocast {mc.dtype}, {mc.inputs} inputs)",
        eager,
        got,
        tolerance,
        info.scratch_outputs,
        find_value_divergence(target.spec, mc.mode, backend, mc.config, mc.op, mc.dtype, mc.inputs),
        reproduce,
        {
            "op": mc.op,
            "dtype": mc.dtype,
            "inputs": mc.inputs,
            "mode": mc.mode,
            "backend": backend,
            "config": mc.config,
        },
    )

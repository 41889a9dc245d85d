"""Every catalogued op of the backend in a mode against eager autocast (``test_modes.py``).

Cases: per selected mode other than eager, dtype under test and listed op with samples,
the first sample with float32 inputs and with inputs already in the autocast dtype.

Procedure: the call under ``torch.autocast`` eagerly and through the mode
(:func:`~conformance.modes.run.run_in_mode`).
Expectation: the same output dtypes, or the difference ``spec/jit.yaml``
``mode_divergences`` declares for the op, dtype and inputs (an xfail with the reason,
counted in the terminal summary; a declaration that no longer diverges fails); then, for
deterministic ops, the same values within the op's tolerance. Where eager autocast raises
because the kernel refuses the inputs natively on this host, the check is not applicable
(in every mode alike); where the raw call runs, eager autocast itself fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.model import Divergence, Spec
from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.harness.compare import output_mismatch
from reference_impl.harness.samples import Materialized, materialize, output_tensors

from ..kit.case import Case
from ..kit.refusal import intercept_only, kernel_gap, raw_call, skip_if_refused
from ..kit.verdict import Declaration, Observation, not_applicable, one_line
from ..target import Target
from .run import run_in_mode

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

    @property
    def id(self) -> str:
        return f"{self.mode}-{self.op}-{self.dtype}-{self.inputs}"


def mode_cases(target: Target, modes: tuple[str, ...]) -> list[ModeCase]:
    return [
        ModeCase(mode, op, dtype, inputs)
        for mode in modes
        if mode != "eager"
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


def find_divergence(spec: Spec, mode: str, op: str, dtype: str, inputs: str) -> Divergence | None:
    entry = spec.mode_divergences.get(mode)
    for d in entry.divergences if entry else ():
        if d.op == op and d.dtype in (None, dtype) and d.inputs == inputs:
            return d
    return None


def declaration(mc: ModeCase, d: Divergence | None) -> Declaration | None:
    """A declared divergence as the verdict's declaration: it explains exactly its observation
    and must fail once the mode agrees with eager again."""
    if d is None:
        return None
    when = f" [condition: {d.condition}]" if d.condition else ""
    where = f"{mc.mode} {mc.op} (autocast {mc.dtype}, {mc.inputs} inputs)"
    return Declaration(
        f"{DECLARED}{where}",
        f"{d.observed_under(mc.dtype)} instead of eager: {d.reason}{when}",
        (d.observed_under(mc.dtype),),
        stale_fails=True,
        where=f"spec/jit.yaml mode_divergences.{mc.mode}",
    )


def inputs_of(target: Target, mc: ModeCase) -> Materialized:
    info = target.spec.op_info(mc.op)
    assert info is not None
    float_dtype = torch.float32 if mc.inputs == "float32" else dtype_of(mc.dtype)
    return materialize(info.samples[0], float_dtype, target.device)


def _run(mode: str, target: Target, mc: ModeCase, backend: str) -> Any:
    m = inputs_of(target, mc)
    try:
        return run_in_mode(
            mode, mc.op, m.args, m.kwargs, device=target.device, dtype=dtype_of(mc.dtype), backend=backend
        )
    except Exception as exc:  # a mode's failure is an observation ("error")
        return exc


def matches_eager(target: Target, mc: ModeCase, backend: str) -> Observation:
    if target.policy_only:
        not_applicable("--policy-only: script/trace/compile need the backend's kernels")
    why = intercept_only(target, mc.op) or kernel_gap(target, mc.op, mc.dtype)
    if why:
        not_applicable(why)
    case = Case("jit", target.device, mc.dtype, op=mc.op, entry=mc.op)
    reproduce = f"pytest conformance --backend {target.device} --mode {mc.mode} -k '{mc.id}'"
    eager = _run("eager", target, mc, backend)
    if isinstance(eager, BaseException):
        raw = raw_call(target, dtype_of(mc.dtype), mc.op, inputs_of(target, mc))
        skip_if_refused(eager, raw)
        if raw.error is None:
            return Observation(
                case,
                MATCHES_EAGER,
                f"{mc.mode}: eager autocast raised but the call without autocast on the reference's "
                "cast inputs runs: eager autocast itself fails",
                "eager runs",
                one_line(eager),
                reproduce=reproduce,
            )
    got = _run(mc.mode, target, mc, backend)
    declared = declaration(mc, find_divergence(target.spec, mc.mode, mc.op, mc.dtype, mc.inputs))
    facts = {f"{mc.mode} raised": one_line(got)} if isinstance(got, BaseException) else {}
    if not declared:
        facts["if intended"] = (
            f"add to spec/jit.yaml mode_divergences.{mc.mode}: {{op: {mc.op}, dtype: {mc.dtype}, "
            f"inputs: {mc.inputs}, observed: {observed_label(got)}, reason: ...}}"
        )
    dtypes = Observation(
        case,
        MATCHES_EAGER,
        f"{mc.mode} gives other output dtypes than eager autocast ({mc.inputs} inputs)",
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
    mismatch = output_mismatch(
        output_tensors(eager),
        output_tensors(got),
        target.spec.tolerance(mc.op, mc.dtype),
        info.scratch_outputs,
    )
    return Observation(
        case,
        MATCHES_EAGER,
        f"{mc.mode} differs from eager ({mc.inputs} inputs)",
        "as eager",
        str(mismatch) if mismatch is not None else "as eager",
        reproduce=reproduce,
    )

"""A mode's declared divergences from eager autocast: dtypes, then values.

A **run** (:class:`Run`) is one program or op call in a compiled or exported mode, named as
the declarations name it: mode, backend (the export kind under export), pass configuration,
dtype, op and input kind (or a region program).

**Dtypes**: a mode's output dtypes must be eager autocast's, or the difference that
``mode_divergences`` declares for the op, dtype and inputs (``spec/jit.yaml`` for
TorchScript, trace and the non-compiling ``torch.compile`` backends; ``spec/compiled.yaml``
for a compiler, export and AOTInductor: :func:`divergence_file`). A declaration that no
longer diverges fails (:func:`declaration`).

**Values**: an op whose outputs have eager's dtypes must also have eager's values: within the
op's tolerance in a mode's default pass, bitwise in a pass that must round exactly where eager
rounds (inductor's ``emulate_precision_casts``). A difference the compiler is known to make
is declared in ``spec/compiled.yaml`` ``value_divergences`` with the largest error observed:
the check reports it xfail with its reason while the error stays within that bound, and
fails beyond it, and warns (``DeclarationNotObserved``) where the values agree. A declaration
holds on the hosts its condition names (the CPU capability); elsewhere the op must agree with
eager. The verdict is the same on the hosts the declarations were observed on (AVX-512, and
AVX2 as ``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` gives it); another host may show a
difference nobody declared, and fails until it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.common import Tolerance
from autocast_spec.model import Divergence, Spec, ValueDivergence
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.compare import flatten, max_abs_error, output_mismatch
from reference_impl.harness.samples import output_tensors
from reference_impl.modes.batch import Config
from reference_impl.modes.run import Mode

from .case import Case, IdText, MixEntry
from .verdict import Declaration, Observation

DECLARED = "declared divergence: "  # the xfail reason's prefix of a dtype divergence
NON_COMPILING = ("eager", "aot_eager")  # torch.compile backends that compile nothing


@dataclass(frozen=True)
class Run:
    """One run in a mode, as declarations name it (an op's call, or a region program)."""

    mode: Mode
    backend: str  # the torch.compile backend; the export kind (strict, non-strict) under export
    config: Config
    dtype: torch.dtype
    op: str = ""
    inputs: MixEntry | None = None  # float32, or the autocast dtype (MixRole.LOWER)
    region: str = ""

    @property
    def fields(self) -> dict[str, str]:
        """The run as a declaration writes it (the spec's names)."""
        out = {"op": self.op} if self.op else {"region": self.region}
        out["dtype"] = dtype_name(self.dtype)
        if self.inputs is not None:
            out["inputs"] = format(IdText(self.inputs))
        return {**out, "mode": self.mode.value, "backend": self.backend, "config": self.config.value}


def observed_label(result: Any) -> str:
    """What a run produced, as the spec writes it: output dtypes (comma-joined) or ``error``."""
    if isinstance(result, BaseException):
        return "error"
    names = [dtype_name(t.dtype) for t in output_tensors(result)]
    return ",".join(names) if names else "no-tensor"


def find_divergence(spec: Spec, run: Run) -> Divergence | None:
    """The declared dtype divergence of the run's op in its mode (under its backend)."""
    f = run.fields
    entry = spec.mode_divergences.get(run.mode.value)
    found = [
        d
        for d in (entry.divergences if entry else ())
        if d.op == run.op
        and d.dtype in (None, f["dtype"])
        and d.inputs == f.get("inputs")
        and d.backend in (None, run.backend)
    ]
    # an entry for this very backend before one for every backend
    return next((d for d in found if d.backend is not None), found[0] if found else None)


def divergence_file(mode: Mode, backend: str) -> str:
    """Where a mode's dtype divergences are declared: TorchScript, trace and the non-compiling
    ``torch.compile`` backends in spec/jit.yaml; a compiler (inductor, a vendor's), export and
    AOTInductor in spec/compiled.yaml."""
    if mode in (Mode.SCRIPT, Mode.TRACE) or (mode is Mode.COMPILE and backend in NON_COMPILING):
        return "spec/jit.yaml"
    return "spec/compiled.yaml"


def declaration(run: Run, d: Divergence | None) -> Declaration | None:
    """A declared dtype divergence as the verdict's declaration: it explains exactly its
    observation and must fail once the mode agrees with eager again."""
    if d is None:
        return None
    f = run.fields
    when = f" [condition: {d.condition}]" if d.condition else ""
    where = f"{f['mode']} {run.op} (autocast {f['dtype']}, {f.get('inputs')} inputs)"
    return Declaration(
        f"{DECLARED}{where}",
        f"{d.observed_under(f['dtype'])} instead of eager: {d.reason}{when}"
        + (f" ({d.source})" if d.source else ""),
        (d.observed_under(f["dtype"]),),
        if_not_observed="fail",
        where=str(d.loc)
        if d.loc
        else f"{divergence_file(run.mode, run.backend)} mode_divergences.{f['mode']}",
    )


def divergence_hint(run: Run, got: Any) -> str:
    """The ``mode_divergences`` entry to add for a dtype difference the run observed."""
    f = run.fields
    backend = f"backend: {run.backend}, " if run.mode is Mode.COMPILE else ""
    return (
        f"add to {divergence_file(run.mode, run.backend)} mode_divergences.{f['mode']}: {{op: {run.op}, "
        f"dtype: {f['dtype']}, inputs: {f.get('inputs')}, {backend}observed: {observed_label(got)}, "
        f"reason: ..., source: <link> or none, seen_on: {torch.__version__.split('+')[0]}}}"
    )


AS_EAGER = "as eager"
WITHIN = "within the declared bound"
DECLARED_VALUES = "declared value divergence: "  # the xfail reason's prefix


def host_capability() -> str:
    """The CPU capability ATen's kernels use here (``avx512``, ``avx2``, ``default``...)."""
    return str(torch.backends.cpu.get_cpu_capability()).lower()


def find_value_divergence(spec: Spec, run: Run) -> ValueDivergence | None:
    """The value declaration covering this run, the host aside (the caller checks it holds here)."""
    f = run.fields
    if run.region:
        return next(
            (
                d
                for d in spec.value_divergences
                if d.covers_region(run.backend, f["config"], run.region, f["dtype"])
            ),
            None,
        )
    return next(
        (
            d
            for d in spec.value_divergences
            if d.covers(f["mode"], run.backend, f["config"], run.op, f["dtype"], f.get("inputs", ""))
        ),
        None,
    )


def declaration_hint(fields: Mapping[str, str], error: float, host: str) -> str:
    """The ``value_divergences`` entry to add for a divergence the run observed."""
    config = fields.get("config", "default")
    run = ", ".join(f"{k}: {v}" for k, v in fields.items() if k != "config")
    release = torch.__version__.split("+")[0]
    return (
        f"add to spec/compiled.yaml value_divergences: {{{run}, max_error: {error:.3g}, reason: ..., "
        f"condition: {{host: any or {host}, config: {config}}}, source: <link> or none, "
        f'seen_on: "{release}"}}'
    )


def largest_error(expected: Any, actual: Any, scratch: tuple[int, ...]) -> float:
    """The largest absolute error over the floating outputs (scratch outputs aside)."""
    worst = 0.0
    pairs = zip(flatten(expected), flatten(actual), strict=False)
    for index, ((_, e), (_, a)) in enumerate(pairs):
        if index in scratch or not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor):
            continue
        if e.is_floating_point() and a.shape == e.shape:
            worst = max(worst, max_abs_error(a, e))
    return worst


def values_observation(
    spec: Spec,
    run: Run,
    case: Case[Any],
    check: str,
    where: str,
    eager: Any,
    got: Any,
    tolerance: Tolerance | None,
    scratch: tuple[int, ...],
    reproduce: str,
) -> Observation:
    """``got`` against ``eager`` (``tolerance`` None: bitwise), and the declaration of
    ``spec`` for the run (``value_divergences``)."""
    declared = find_value_divergence(spec, run)
    exp, act = output_tensors(eager), output_tensors(got)
    mismatch = output_mismatch(exp, act, tolerance, scratch)
    host = host_capability()
    if mismatch is None and declared is not None and declared.holds_on(host):
        # declared here, yet the values agree: a warning, for the declaration may hold on
        # another build of the same host capability (the verdict stays the same everywhere)
        stale = Declaration(
            f"{DECLARED_VALUES}{where}",
            f"{declared.reason} (declared {declared.max_error})",
            where=str(declared.loc),
            if_not_observed="warn",
        )
        return Observation(
            case,
            check,
            f"{where} differs from eager",
            AS_EAGER,
            AS_EAGER,
            declared=stale,
            reproduce=reproduce,
        )
    if mismatch is None or mismatch.what != "values":
        observed = AS_EAGER if mismatch is None else str(mismatch)
        return Observation(
            case, check, f"{where} differs from eager", AS_EAGER, observed, reproduce=reproduce
        )
    error = largest_error(exp, act, scratch)
    facts: dict[str, Any] = {"max abs error": f"{error:.4g}", "host": host}
    declaration = None
    if declared is not None and declared.holds_on(host):
        bound = f"{WITHIN} ({error:.3g} <= {declared.max_error})"
        observed = (
            bound
            if error <= declared.max_error
            else f"{mismatch}; over the declared bound {declared.max_error}"
        )
        declaration = Declaration(
            f"{DECLARED_VALUES}{where}",
            f"max abs error {error:.3g} (declared {declared.max_error}): {declared.reason} "
            f"[condition: host {declared.host}, {declared.config}; {declared.cited}]",
            (bound,),
            where=str(declared.loc),
        )
    else:
        observed = str(mismatch)
        if declared is not None:
            facts["declared"] = f"at {declared.loc} for host {declared.host} only (this host: {host})"
        else:
            facts["if intended"] = declaration_hint(run.fields, error, host)
    return Observation(
        case,
        check,
        f"{where} differs from eager",
        AS_EAGER,
        observed,
        facts=facts,
        declared=declaration,
        reproduce=reproduce,
    )

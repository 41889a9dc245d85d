"""Values in a compiled mode against eager autocast, and the declared value divergences.

An op whose outputs have eager's dtypes must also have eager's values: within the op's
tolerance in a mode's default pass, bitwise in a pass that must round exactly where eager
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
from typing import Any

import torch

from autocast_spec.common import Tolerance
from autocast_spec.model import Spec, ValueDivergence
from reference_impl.harness.compare import flatten, max_abs_error, output_mismatch
from reference_impl.harness.samples import output_tensors

from ..kit.case import Case
from ..kit.verdict import Declaration, Observation

AS_EAGER = "as eager"
WITHIN = "within the declared bound"
DECLARED_VALUES = "declared value divergence: "  # the xfail reason's prefix


def host_capability() -> str:
    """The CPU capability ATen's kernels use here (``avx512``, ``avx2``, ``default``...)."""
    return str(torch.backends.cpu.get_cpu_capability()).lower()


def find_value_divergence(
    spec: Spec, mode: str, backend: str, config: str, op: str, dtype: str, inputs: str
) -> ValueDivergence | None:
    """The declaration covering this run, the host aside (the caller checks it holds here)."""
    return next(
        (d for d in spec.value_divergences if d.covers(mode, backend, config, op, dtype, inputs)),
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
    case: Case,
    check: str,
    where: str,
    eager: Any,
    got: Any,
    tolerance: Tolerance | None,
    scratch: tuple[int, ...],
    declared: ValueDivergence | None,
    reproduce: str,
    declare_as: Mapping[str, str] | None = None,
) -> Observation:
    """``got`` against ``eager`` (``tolerance`` None: bitwise), and the declaration for it.
    ``declare_as``: the run's fields of a ``value_divergences`` entry (op, dtype, inputs, mode,
    backend, config), for the hint a failure gives."""
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
        elif declare_as is not None:
            facts["if intended"] = declaration_hint(declare_as, error, host)
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

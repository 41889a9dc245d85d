"""regions: small multi-op autocast regions compiled as one graph against eager autocast.

``--mode compile`` compiles each catalogued op on its own inputs, which autocast casts to one
dtype: no graph there holds a lower-precision op's output meeting a float32 tensor, or a
float32 result that a lower-precision op rounds. A compiler's fusions and decompositions work
on exactly those graphs (pytorch#164455: inductor fused a bias-free linear's bfloat16 output
and a float32 residual into one mixed-dtype addmm; pytorch#168126: inductor's layer_norm
decomposition differs from the kernel in float32's last bits, which the next linear's rounding
amplifies). A **region program** is such a graph, as users compile it: a few ops inside one
``torch.autocast`` region (:data:`PROGRAMS`).

Cases (with ``--mode compile``): per program, dtype under test and pass of the run's
``--compile-backend`` (inductor: its default configuration and ``emulate_precision_casts``),
where ``--op`` selects one of the program's ops; and every program a declaration names.
Procedure: the program eagerly under ``torch.autocast`` and through ``torch.compile``
(``fullgraph``, a graph of its own per pass), on the same inputs (float32, seeded).
Expectation: the output dtypes exactly as eager's (a difference or an error: a known bug of
``spec/rules.yaml`` for check ``regions.matches_eager``, with its release range); then the values within
the tolerance of the program's last op (default pass) or bitwise (a pass that rounds where eager
rounds), or as ``spec/compiled.yaml`` ``value_divergences`` declares with ``region:``
(:mod:`conformance.kit.divergences`: xfail within the declared ``max_error``, a failure beyond it).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from autocast_spec.model import Spec
from reference_impl.engine.dtypes import dtype_name
from reference_impl.engine.torch_registry import overload_name
from reference_impl.harness.samples import output_tensors
from reference_impl.modes.batch import Config, Pass
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND, Mode

from ..kit.case import Case, omitted
from ..kit.category import Category
from ..kit.divergences import Run, values_observation
from ..kit.verdict import Observation, first_line, not_applicable
from ..target import Target
from .modes import passes

MATCHES_EAGER = "regions.matches_eager"


# ---------------------------------------------------------------------------
# The programs: ``fn(device, dtype, *tensors)`` with its region inside
# ---------------------------------------------------------------------------


def linear_plus_float32_residual(device: str, dtype: torch.dtype, x: Any, w: Any, residual: Any) -> Any:
    with torch.autocast(device, dtype=dtype):
        return residual + F.linear(x, w)  # a lower-precision output added to a float32 tensor


def layer_norm_linear(device: str, dtype: torch.dtype, x: Any, g: Any, b: Any, w: Any) -> Any:
    with torch.autocast(device, dtype=dtype):
        return F.linear(F.layer_norm(x, (x.shape[-1],), g, b), w)  # a float32 result rounded


def attention_block(device: str, dtype: torch.dtype, x: Any, wq: Any, wk: Any, wv: Any) -> Any:
    with torch.autocast(device, dtype=dtype):
        q, k, v = F.linear(x, wq), F.linear(x, wk), F.linear(x, wv)
        scores = torch.softmax(q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5, dim=-1)
        return scores @ v


Randn = Callable[..., torch.Tensor]


@dataclass(frozen=True)
class Program:
    """A region program: ``fn`` and the shapes of its float32 inputs (``inputs(randn)``). The ops
    it calls are read from the program itself (:func:`program_ops`), never listed by hand."""

    id: str
    fn: Callable[..., Any]
    inputs: Callable[[Randn], tuple[torch.Tensor, ...]]
    summary: str


PROGRAMS: dict[str, Program] = {
    p.id: p
    for p in (
        Program(
            "linear-plus-float32-residual",
            linear_plus_float32_residual,
            lambda r: (r(8, 16), r(16, 16) / 4, r(8, 16)),
            "a bias-free linear's output added to a float32 residual (pytorch#164455's pattern)",
        ),
        Program(
            "layer-norm-linear",
            layer_norm_linear,
            lambda r: (r(1024, 128), r(128) / 10 + 1, r(128) / 10, r(128, 128) / 128**0.5),
            "a dim-128 layer_norm feeding a bias-free linear (pytorch#168126's pattern)",
        ),
        Program(
            "attention-block",
            attention_block,
            lambda r: (r(2, 16, 32), *(r(32, 32) / 32**0.5 for _ in range(3))),
            "q, k, v linears, softmax of the scaled scores, and the product with v",
        ),
    )
}


def program_inputs(program: Program, device: str) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(0)
    tensors = program.inputs(lambda *shape: torch.randn(*shape, generator=gen))
    return tuple(t.to(device) for t in tensors)


@functools.cache
def traced_ops(program: Program) -> tuple[str, ...]:
    """The aten overloads ``program`` calls inside its region, in order, as autocast sees them:
    a pre-dispatch trace (``make_fx(pre_dispatch=True)``) stops above the Autocast key, where
    ``F.linear`` is still ``aten::linear``. Traced once per program, on cpu under bfloat16."""
    tensors = program_inputs(program, "cpu")
    graph = make_fx(lambda *t: program.fn("cpu", torch.bfloat16, *t), pre_dispatch=True)(*tensors)
    return tuple(
        overload_name(node.target)
        for node in graph.graph.nodes
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
    )


def program_ops(program: Program, spec: Spec) -> tuple[str, ...]:
    """The catalogued ops ``program`` calls, in order: ``--op`` selects the program by any of
    them, and the last one's tolerance judges its values."""
    return tuple(op for op in traced_ops(program) if op in spec.ops)


def fresh(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with a code object of its own: Dynamo caches graphs per code object, and each pass
    needs its own graph, compiled under the pass's configuration."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__)


def run_compiled(program: Program, device: str, dtype: torch.dtype, how: Pass) -> Any:
    """The program compiled under ``how`` (a new graph) and run: its result, or its error."""
    tensors = program_inputs(program, device)
    compiled = torch.compile(fresh(program.fn), backend=how.backend, dynamic=False, fullgraph=True)
    try:
        with how.configured():
            return compiled(device, dtype, *tensors)
    except Exception as exc:  # the compiler's failure is an observation
        return exc


# ---------------------------------------------------------------------------
# Cases and the check
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Compiled:
    """A region program compiled in one pass."""

    region: str
    backend: str = omitted(DEFAULT_COMPILE_BACKEND)  # torch.compile's
    config: Config = omitted(Config.DEFAULT)
    mode: ClassVar[Mode] = Mode.COMPILE  # the mode a certification groups it under
    WHOLE_ID: ClassVar[bool] = True
    ID: ClassVar[str] = "compile{backend}{config}-{region}-{dtype}"


def declared_regions(spec: Spec) -> set[str]:
    return {d.region for d in spec.value_divergences if d.region is not None}


def cases(target: Target) -> list[Case[Compiled]]:
    """Every selected program (and every program a declaration names), per dtype and pass."""
    if Mode.COMPILE not in target.modes:
        return []
    chosen = {
        p.id
        for p in PROGRAMS.values()
        if not target.selected_ops or any(target.selects(op) for op in program_ops(p, target.spec))
    }
    return [
        Case("regions", target.device, dtype, params=Compiled(region, backend, config))
        for backend in target.compile_backends
        for region in sorted(chosen | declared_regions(target.spec))
        for dtype in target.dtypes
        for config in passes(Mode.COMPILE, backend)
    ]


CATEGORY = Category(
    "regions",
    __doc__,
    checks=(MATCHES_EAGER,),
    generators=(cases,),
    mandatory_able=False,
)


def outcome_label(result: Any) -> str:
    """Output dtypes (comma-joined), or ``error: <first line>`` (what a known bug declares)."""
    if isinstance(result, BaseException):
        return f"error: {first_line(result)}"
    return ",".join(dtype_name(t.dtype) for t in output_tensors(result))


def reproduction(target: Target, case: Case[Compiled]) -> str:
    backend = case.params.backend if case.params else DEFAULT_COMPILE_BACKEND
    return (
        f"pytest conformance --backend {target.device} --dtype {case.dtype_text} --mode compile "
        f"--compile-backend {backend} -m mode_check -k 'region_matches_eager and {case.id}'"
    )


def matches_eager(target: Target, case: Case[Compiled]) -> Observation:
    """The program compiled under the case's pass against eager autocast: dtypes, then values."""
    rc, dtype = case.params, case.dtype
    assert rc is not None and dtype is not None
    backend = rc.backend
    program = PROGRAMS.get(rc.region)
    shown = replace(
        case, op=f"region {rc.region}", entry=f"{__name__}.{program.fn.__name__}" if program else ""
    )
    reproduce = reproduction(target, case)
    if program is None:
        return Observation(
            shown,
            MATCHES_EAGER,
            f"spec/compiled.yaml declares region {rc.region!r}, which no program of "
            "conformance/categories/regions.py is: fix the id or add the program",
            "a program",
            "none",
            reproduce=reproduce,
        )
    if target.policy_only:
        not_applicable("--policy-only: a compiled region needs the backend's kernels")
    try:
        eager = program.fn(target.device, dtype, *program_inputs(program, target.device))
    except Exception as exc:
        return Observation(
            shown,
            MATCHES_EAGER,
            "eager autocast raised on the region program",
            "a result",
            outcome_label(exc),
            reproduce=reproduce,
        )
    got = run_compiled(program, target.device, dtype, Pass(backend, rc.config))
    where = f"compile ({backend}, {rc.config.value}) region {rc.region} (autocast {case.dtype_text})"
    dtypes = Observation(
        shown,
        MATCHES_EAGER,
        f"{where} gives other output dtypes than eager autocast",
        outcome_label(eager),
        outcome_label(got),
        facts={"program": program.summary},
        reproduce=reproduce,
    )
    if dtypes.expected != dtypes.observed:
        return dtypes
    tolerance = (
        None
        if rc.config is Config.EMULATE
        else target.spec.tolerance(program_ops(program, target.spec)[-1], case.dtype_text)
    )
    run = Run(Mode.COMPILE, backend, rc.config, dtype, region=rc.region)
    return values_observation(
        target.spec, run, shown, MATCHES_EAGER, where, eager, got, tolerance, (), reproduce
    )

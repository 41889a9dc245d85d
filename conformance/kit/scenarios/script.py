"""TorchScript scenarios (seed 000: JIT scripting & autocast, known limitations).

Each function reproduces one limitation of ``spec/jit.yaml`` (see :mod:`.core`).
The scripted functions are written out, since TorchScript compiles source; the ops they
report are labelled with the entry's ``observes``. Where the scenario is about a class
of ops (CUDA's banned ops, CUDA's fp32_append_dtype ops), the ops come from the spec by
policy and the calls from the op catalog's samples.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.engine.torch_registry import split_op_name
from reference_impl.harness.samples import materialize
from reference_impl.harness.state import quiet
from reference_impl.modes.run import Mode, fresh_in_mode

from ..divergences import observed_label
from .core import (
    DEVICE,
    LOWER,
    Outputs,
    ScenarioBug,
    ScenarioOutcome,
    Setting,
    ac,
    jit_autocast_pass,
    mats,
    raised,
    run_twice,
    scenario,
)

# The device whose policy lists TorchScript's autocast pass copies its own lists from
# (torch/csrc/jit/passes/autocast.cpp: "TODO: Use the list from AMP eager directly").
JIT_PASS_LISTS_FROM = "cuda"
JIT_FP32_CAST = "aten::_autocast_to_full_precision"  # the graph node the JIT pass casts to float32 with


@scenario("script-region-basic")
def _script_region_basic(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            x = torch.mm(a, b)
            return x, torch.relu(x)

    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(lambda: ctx.outputs(s(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


@scenario("script-decorator-on-callee")
def _script_decorator_on_callee(ctx: Setting) -> ScenarioOutcome:
    @torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    def helper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return helper(a, b)

    return raised(lambda: torch.jit.script(fn))


@scenario("script-decorated-scripted-function")
def _script_decorated(ctx: Setting) -> ScenarioOutcome:
    def make() -> Any:
        @torch.jit.script
        @torch.autocast(device_type="cpu", dtype=torch.bfloat16)
        def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.mm(a, b)

        return fn

    return raised(make)


@scenario("script-eager-decorator-outside")
def _script_eager_decorator_outside(ctx: Setting) -> ScenarioOutcome:
    def plain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    wrapped = torch.autocast(device_type="cpu", dtype=torch.bfloat16)(torch.jit.script(plain))
    a, b = mats()
    eager = ctx.outputs(torch.autocast("cpu", dtype=LOWER)(plain)(a, b))
    return run_twice(lambda: ctx.outputs(wrapped(a, b)), eager, ctx.without_region(a.dtype))


@scenario("script-nonconstant-enabled")
def _script_nonconstant_enabled(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor, use_amp: bool) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=use_amp):
            return torch.mm(a, b)

    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(
        lambda: ctx.outputs(s(a, b, True)), ctx.outputs(fn(a, b, True)), ctx.without_region(a.dtype)
    )


@scenario("script-with-autocast-as")
def _script_with_as(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16) as instance:
            e = torch.mm(a, b)
        with instance:
            f = torch.mm(a, b)
        return e, f

    def reentered(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Eager autocast's result of re-entering the bound region, as a second region of the same
        arguments (before 2.9 eager ``autocast.__enter__`` returned None: ``as x`` binds None)."""
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            e = torch.mm(a, b)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            f = torch.mm(a, b)
        return e, f

    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(lambda: ctx.outputs(s(a, b)), ctx.outputs(reentered(a, b)), ctx.without_region(a.dtype))


@scenario("script-conditional-autocast")
def _script_conditional(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        on = torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=True)
        off = torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False)
        with on if bool(a[0][0] > -1.0) else off:
            return torch.mm(a, b)

    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(lambda: ctx.outputs(s(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


@scenario("script-nested-and-reused-regions")
def _script_nested(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
            e = torch.mm(a, b)
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=True):
                f = torch.mm(e, b)
                with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
                    g = torch.mm(e, b)
        return e, f, g

    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(lambda: ctx.outputs(s(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


@scenario("script-promote-conservative")
def _script_promote(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.add(a, b), torch.mul(a, b), torch.addcmul(a, a, b), torch.cat([a, b])

    a, b = mats(dtype=LOWER)
    s = torch.jit.script(fn)
    return run_twice(lambda: ctx.outputs(s(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


@scenario("script-control-flow-types")
def _script_control_flow(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            if bool(a[0][0] > -1.0):
                e = torch.mm(a, b)
                x = 1
            else:
                e = torch.mm(b, a)
                x = 2
            f = torch.mm(b, e) * x
        return e, f

    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(lambda: ctx.outputs(s(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


def _runs(ctx: Setting, op: str) -> bool:
    """The op's catalog sample runs on this torch (not ``intercept_only``: a Dimname overload
    whose kernel needs named tensors, say)."""
    info = ctx.spec.op_info(op)
    return info is not None and not info.intercept_only


def _cast_before(op: str, ctx: Setting, device: str, dtype: torch.dtype) -> bool:
    """Whether the JIT pass casts the first input of ``op`` (its catalog sample, scripted in a
    ``device``/``dtype`` region and run twice) to float32, read on the optimized graph."""
    info = ctx.spec.op_info(op)
    if info is None or not info.samples:
        raise ScenarioBug(f"{op} has no sample in spec/ops: the scenario cannot call it")
    m = materialize(info.samples[0], torch.float32, DEVICE)
    with quiet():
        call = fresh_in_mode(Mode.SCRIPT, op, m.args, m.kwargs, device=device, dtype=dtype)
        call()
        call()
    ns, name, _ = split_op_name(op)
    for node in torch.jit.last_executed_optimized_graph().nodes():
        if node.kind() == f"{ns}::{name}":
            return bool(next(iter(node.inputs())).node().kind() == JIT_FP32_CAST)
    raise ScenarioBug(f"no {ns}::{name} node in the optimized graph of the scripted {op} call")


@scenario("script-missing-fp32-append-dtype")
def _script_missing_append_dtype(ctx: Setting) -> ScenarioOutcome:
    """CUDA's fp32_append_dtype ops (from the spec) get no cast from the JIT pass: read the
    optimized graph. ``observes`` names the control, an op the pass does cast to float32."""
    source = ctx.spec.device(JIT_PASS_LISTS_FROM)
    picked = [op for op in source.ops_with(Policy.FP32_APPEND_DTYPE) if _runs(ctx, op)]
    if not picked:
        raise ScenarioBug(f"the {JIT_PASS_LISTS_FROM} spec lists no fp32_append_dtype op whose sample runs")
    region = dtype_of(source.default_dtype)
    cast = {op: _cast_before(op, ctx, JIT_PASS_LISTS_FROM, region) for op in (*ctx.ops, *picked)}
    detail = f"input cast to float32 inserted by the JIT pass: {cast}"
    if not all(cast[op] for op in ctx.ops):
        return ScenarioOutcome("works", detail="the pass cast nothing at all (control op uncast); " + detail)
    outcome = "ignored" if not any(cast[op] for op in picked) else "works"
    return ScenarioOutcome(outcome, detail=detail)


@scenario("script-pass-fp32-list")
def _script_fp32_list(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor):  # type: ignore[no-untyped-def]
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return (
                torch.exp(a),
                torch.log(a),
                torch.pow(a, 2),
                torch.nn.functional.gelu(a),
                torch.softmax(a, 0),
                torch.sum(a),
                torch.nn.functional.layer_norm(a, [4]),
                torch.cumsum(a, 0),
                torch.prod(a),
                torch.log_softmax(a, 0),
                torch.rsqrt(a),
            )

    (a,) = mats(1, dtype=LOWER)
    s = torch.jit.script(fn)
    return run_twice(lambda: ctx.outputs(s(a)), ctx.outputs(fn(a)), ctx.without_region(a.dtype))


@scenario("script-pass-lower-precision-list")
def _script_lower_list(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor, v: torch.Tensor):  # type: ignore[no-untyped-def]
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return (
                torch.mv(a, v),
                torch.addmv(v, a, v),
                torch.addr(a, v, v),
                torch.linalg.vecdot(a, b),
                torch.chain_matmul(a, b),
                torch.mm(a, b),
            )

    a, b = mats()
    v = torch.rand(4, generator=torch.Generator().manual_seed(1))
    with quiet():
        s = torch.jit.script(fn)
        eager = ctx.outputs(fn(a, b, v))
        return run_twice(lambda: ctx.outputs(s(a, b, v)), eager, ctx.without_region(a.dtype))


@scenario("script-binary-cross-entropy")
def _script_bce(ctx: Setting) -> ScenarioOutcome:
    """The ops the JIT pass bans (those banned on the device its lists come from) that CPU
    autocast lists: each op's catalog sample in a scripted CPU region."""
    cpu, source = ctx.spec.device(DEVICE), ctx.spec.device(JIT_PASS_LISTS_FROM)
    ops = [
        op for op in source.ops_with(Policy.BANNED) if cpu.policy_of(op) is not None and ctx.spec.op_info(op)
    ]
    if not ops:
        raise ScenarioBug(
            f"no op is banned on {JIT_PASS_LISTS_FROM} and listed on {DEVICE}: nothing to script"
        )
    inputs = torch.float32
    calls = {}
    for op in ops:
        info = ctx.spec.op_info(op)
        assert info is not None
        m = materialize(info.samples[0], inputs, DEVICE)
        calls[op] = {
            mode: fresh_in_mode(mode, op, m.args, m.kwargs, device=DEVICE, dtype=LOWER)
            for mode in (Mode.EAGER, Mode.SCRIPT)
        }

    def run(mode: Mode) -> Outputs:
        return tuple((op, observed_label(c[mode]())) for op, c in calls.items())

    dropped = tuple((op, dtype_name(inputs)) for op in ops)  # no autocast: the inputs' dtype
    return run_twice(lambda: run(Mode.SCRIPT), run(Mode.EAGER), dropped)


@scenario("script-autocast-false-under-eager-autocast")
def _script_off_under_eager(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
            return torch.mm(a, b)

    a, b = mats()
    s = torch.jit.script(fn)
    with ac():
        eager = ctx.outputs(fn(a, b))
        return run_twice(lambda: ctx.outputs(s(a, b)), eager, ctx.under_outer_autocast(a.dtype))


@scenario("script-is-autocast-enabled-in-region")
def _script_is_enabled_crash(ctx: Setting) -> ScenarioOutcome:
    """Run in a child process: with the JIT autocast pass on, this pattern kills the interpreter."""
    labels = ctx.ops  # what the scripted function reports, should it stop crashing
    code = (
        "import json, torch\n"
        "def fn(x: torch.Tensor) -> bool:\n"
        "    with torch.autocast(device_type='cpu', dtype=torch.bfloat16):\n"
        "        return torch.is_autocast_cpu_enabled()\n"
        "print(json.dumps([fn(torch.ones(2)), torch.jit.script(fn)(torch.ones(2))]))\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "is_autocast_enabled_in_region.py"
        script.write_text(code, encoding="utf-8")  # TorchScript reads the source from a file
        proc = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
        )
    if proc.returncode < 0:
        return ScenarioOutcome("crash", message=f"signal {-proc.returncode}", detail=proc.stderr[-400:])
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return ScenarioOutcome("error", message=lines[-1] if lines else "", detail=proc.stderr[-400:])
    eager, scripted = json.loads(proc.stdout.strip().splitlines()[-1])
    verdict = "works" if eager == scripted else "differs"
    return ScenarioOutcome(
        verdict,
        differs=() if verdict == "works" else tuple((op, str(scripted)) for op in labels),
        detail=proc.stdout[-200:],
    )


@scenario("script-jit-pass-disabled")
def _script_pass_disabled(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.mm(a, b)

    a, b = mats()
    with jit_autocast_pass(False):
        s = torch.jit.script(fn)
        return run_twice(lambda: ctx.outputs(s(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))

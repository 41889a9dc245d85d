"""Tracing scenarios, and script and trace calling each other (seed 000; seed 003: the CPU
inference path, trace + freeze). See :mod:`.core`."""

from __future__ import annotations

import torch

from reference_impl.harness.state import quiet

from .core import Outputs, ScenarioOutcome, Setting, ac, mats, run_twice, scenario

# ---------------------------------------------------------------------------
# Mixing tracing and scripting (seed 000)
# ---------------------------------------------------------------------------


@scenario("script-calls-traced-autocast-false")
def _script_calls_traced_off(ctx: Setting) -> ScenarioOutcome:
    def helper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
            return torch.mm(a, b)

    a, b = mats()
    with quiet():
        traced = torch.jit.trace(helper, (a, b))

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=True):
            return traced(a, b)

    def eager_fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with ac():
            return helper(a, b)

    s = torch.jit.script(fn)
    return run_twice(
        lambda: ctx.outputs(s(a, b)), ctx.outputs(eager_fn(a, b)), ctx.under_outer_autocast(a.dtype)
    )


@scenario("script-calls-traced")
def _script_calls_traced(ctx: Setting) -> ScenarioOutcome:
    def helper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()
    traced = torch.jit.trace(helper, (a, b))

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return traced(a, b)

    with ac():
        eager = ctx.outputs(helper(a, b))
    s = torch.jit.script(fn)
    return run_twice(lambda: ctx.outputs(s(a, b)), eager, ctx.without_region(a.dtype))


@scenario("trace-calls-scripted-under-autocast")
def _trace_calls_scripted(ctx: Setting) -> ScenarioOutcome:
    def inner(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    scripted = torch.jit.script(inner)

    def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return scripted(a, b)

    a, b = mats()
    eager = ctx.outputs(outer(a, b))
    with quiet():
        traced = torch.jit.trace(outer, (a, b))
    return run_twice(lambda: ctx.outputs(traced(a, b)), eager, ctx.without_region(a.dtype))


@scenario("trace-calls-scripted-with-region")
def _trace_calls_scripted_region(ctx: Setting) -> ScenarioOutcome:
    def inner(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.mm(a, b)

    scripted = torch.jit.script(inner)

    def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return scripted(a, b)

    a, b = mats()
    with quiet():
        traced = torch.jit.trace(outer, (a, b))
    return run_twice(lambda: ctx.outputs(traced(a, b)), ctx.outputs(inner(a, b)), ctx.without_region(a.dtype))


# ---------------------------------------------------------------------------
# Tracing (seed 003: the CPU inference path, trace + freeze)
# ---------------------------------------------------------------------------


class _ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def _trace_freeze(ctx: Setting, cache_enabled: bool | None) -> ScenarioOutcome:
    model = _ConvNet().eval()
    x = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    with ac():
        eager = ctx.outputs(model(x))

    def call() -> Outputs:
        with quiet(), ac(cache_enabled=cache_enabled):
            traced = torch.jit.trace(model, x)
        frozen = torch.jit.freeze(traced)
        return ctx.outputs(frozen(x))

    return run_twice(call, eager, ctx.without_region(x.dtype))


@scenario("trace-freeze-cpu")
def _trace_freeze_default(ctx: Setting) -> ScenarioOutcome:
    return _trace_freeze(ctx, None)


@scenario("trace-freeze-cpu-cache-disabled")
def _trace_freeze_no_cache(ctx: Setting) -> ScenarioOutcome:
    return _trace_freeze(ctx, False)


@scenario("trace-records-autocast-casts")
def _trace_records(ctx: Setting) -> ScenarioOutcome:
    def plain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()
    with quiet(), ac():
        traced = torch.jit.trace(plain, (a, b))  # traced under an outer autocast
    # run outside autocast: eager gives the inputs' dtype; the trace replays the recorded casts
    eager = ctx.outputs(plain(a, b))
    return run_twice(lambda: ctx.outputs(traced(a, b)), eager, ctx.without_region(a.dtype))


@scenario("trace-run-under-eager-autocast")
def _trace_run_under_autocast(ctx: Setting) -> ScenarioOutcome:
    def plain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()
    traced = torch.jit.trace(plain, (a, b))
    with ac():
        eager = ctx.outputs(plain(a, b))
        return run_twice(lambda: ctx.outputs(traced(a, b)), eager, ctx.without_region(a.dtype))

"""torch.compile scenarios, with the run's backend (``Setting.backend``: ``--compile-backend``,
default aot_eager, which needs no C++ toolchain). See :mod:`.core`."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from reference_impl.engine.dtypes import dtype_name

from .core import DEVICE, Outputs, ScenarioOutcome, Setting, ac, mats, run_twice, scenario, values


def _compiled(ctx: Setting, fn: Callable[..., Any], fullgraph: bool = False) -> Callable[..., Any]:
    return torch.compile(fn, backend=ctx.backend, fullgraph=fullgraph)


@scenario("compile-with-autocast-as")
def _compile_with_as(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16) as instance:
            x = torch.mm(a, b)
        with instance:
            return torch.mm(x.float(), b)

    def reentered(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Eager autocast's result of re-entering the bound region, as a second region of the same
        arguments (before 2.9 eager ``autocast.__enter__`` returned None: ``as x`` binds None)."""
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            x = torch.mm(a, b)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.mm(x.float(), b)

    a, b = mats()
    c = _compiled(ctx, fn)
    return run_twice(lambda: ctx.outputs(c(a, b)), ctx.outputs(reentered(a, b)), ctx.without_region(a.dtype))


@scenario("compile-nonconstant-enabled")
def _compile_nonconstant(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor, use_amp: bool) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=use_amp):
            return torch.mm(a, b)

    a, b = mats()
    c = _compiled(ctx, fn)
    return run_twice(
        lambda: ctx.outputs((c(a, b, True), c(a, b, False))),
        ctx.outputs((fn(a, b, True), fn(a, b, False))),
        ctx.without_region(a.dtype),
    )


@scenario("compile-decorated-function")
def _compile_decorated(ctx: Setting) -> ScenarioOutcome:
    @torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()
    c = _compiled(ctx, fn, fullgraph=True)
    return run_twice(lambda: ctx.outputs(c(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


@scenario("compile-autocast-false-under-eager-autocast")
def _compile_off_under_eager(ctx: Setting) -> ScenarioOutcome:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
            return torch.mm(a, b)

    a, b = mats()
    c = _compiled(ctx, fn)
    with ac():
        eager = ctx.outputs(fn(a, b))
        return run_twice(lambda: ctx.outputs(c(a, b)), eager, ctx.under_outer_autocast(a.dtype))


REGION = torch.float16  # the dtype of the region the exception escapes (not the default)
STATE = ("is_autocast_enabled", "get_autocast_dtype")


@scenario("compile-exception-restores-state")
def _compile_exception(ctx: Setting) -> ScenarioOutcome:
    class Boom(Exception):
        pass

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=REGION):
            x = torch.mm(a, b)
            if x.sum() > -1e30:
                raise Boom("escape the region")
            return x

    a, b = mats()
    c = _compiled(ctx, fn)

    def state() -> Outputs:
        return values(
            STATE, (torch.is_autocast_enabled(DEVICE), dtype_name(torch.get_autocast_dtype(DEVICE)))
        )

    before = state()

    def call() -> Outputs:
        with contextlib.suppress(Boom):
            c(a, b)
        return state()

    return run_twice(call, before, values(STATE, (True, dtype_name(REGION))))  # leaked: the region's state


@scenario("compile-graph-break-in-region")
def _compile_graph_break(ctx: Setting) -> ScenarioOutcome:
    """A graph break inside the region: Dynamo resumes in a new frame, which must re-enter the
    region (the op after the break), and leave it (the op after the region)."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            x = torch.mm(a, b)
            torch._dynamo.graph_break()  # a no-op eagerly
            y = torch.mm(a, b)
        return x, y, torch.mm(a, b)

    a, b = mats()
    c = _compiled(ctx, fn)
    return run_twice(lambda: ctx.outputs(c(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


@scenario("compile-nested-regions")
def _compile_nested(ctx: Setting) -> ScenarioOutcome:
    """Regions nested in one compiled graph, each op with a float32 bias (pytorch#121631:
    "invalid dtype for bias" under inductor): a disabled region and one of another dtype inside
    an enabled one (fed the outer region's result), then the outer region again."""

    def fn(a: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
        linear = torch.nn.functional.linear
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            x = linear(a, w, bias)
            with torch.autocast(device_type="cpu", enabled=False):
                y = linear(a, w, bias)
            with torch.autocast(device_type="cpu", dtype=REGION):
                z = linear(x, w, bias)
                v = torch.addmm(bias, a, w)
            return x, y, z, v, linear(z, w, bias)

    a, w, m = mats(3)
    bias = m[0]
    c = _compiled(ctx, fn, fullgraph=True)
    return run_twice(
        lambda: ctx.outputs(c(a, w, bias)), ctx.outputs(fn(a, w, bias)), ctx.without_region(a.dtype)
    )


@scenario("compile-dynamic-shapes")
def _compile_dynamic(ctx: Setting) -> ScenarioOutcome:
    """torch.compile(dynamic=True) under an eager region, with a disabled region inside, called
    with two shapes (one symbolic graph): the graph must run with the autocast state it was
    traced under."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x = torch.mm(a, b)
        with torch.autocast(device_type="cpu", enabled=False):
            return x, torch.mm(a, b)

    small, big = mats(), mats(n=2, size=6)
    c = torch.compile(fn, backend=ctx.backend, dynamic=True)
    with ac():
        eager = ctx.outputs(fn(*small) + fn(*big))
        return run_twice(
            lambda: ctx.outputs(c(*small) + c(*big)), eager, ctx.under_outer_autocast(small[0].dtype)
        )


@scenario("compile-reused-across-autocast-states")
def _compile_reused(ctx: Setting) -> ScenarioOutcome:
    """One compiled function (no region of its own) called inside an eager region, outside any,
    then inside a region of another dtype: each state needs its own graph (the guards)."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    def calls(f: Callable[..., torch.Tensor], a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with ac():
            inside = f(a, b)
        outside = f(a, b)
        with torch.autocast(device_type=DEVICE, dtype=REGION):
            return inside, outside, f(a, b)

    a, b = mats()
    c = _compiled(ctx, fn)
    eager = ctx.outputs(calls(fn, a, b))
    return run_twice(lambda: ctx.outputs(calls(c, a, b)), eager, ctx.without_region(a.dtype))

"""torch.export scenarios: what an exported program does with autocast regions, and with an
autocast region around the export or the decomposition. See :mod:`.core`.

A scenario exports non-strictly (Python tracing) and strictly (Dynamo), which trace a region
differently (:data:`KINDS`), and runs the program (``ep.module()``) and its decomposition
(``ep.run_decompositions().module()``): the outputs are in that order. The programs are built
on the scenario's first call (an export that raises is the observation) and called again by
the second (:func:`.core.run_twice`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from reference_impl.modes.run import Region

from .core import Outputs, ScenarioOutcome, Setting, ac, mats, run_twice, scenario

KINDS = (False, True)  # strict=False, then strict=True


def _exported(fn: Callable[..., Any], tensors: Sequence[torch.Tensor], strict: bool) -> Any:
    return torch.export.export(Region(fn), tuple(tensors), strict=strict)


def _programs(fn: Callable[..., Any], tensors: Sequence[torch.Tensor]) -> Callable[[], tuple[Any, ...]]:
    """A call of each export kind's program of ``fn``, then of its decomposition, on ``tensors``:
    their outputs, in that order (the programs are built on the first call)."""

    @functools.cache
    def programs() -> list[Callable[..., Any]]:
        made = []
        for strict in KINDS:
            ep = _exported(fn, tensors, strict)
            made += [ep.module(), ep.run_decompositions().module()]
        return made

    return lambda: tuple(out for program in programs() for out in program(*tensors))


@scenario("export-decomposed-composites")
def _export_composites(ctx: Setting) -> ScenarioOutcome:
    """torch.export keeps composite (CompositeImplicitAutograd) ops whole inside the region;
    run_decompositions() then decomposes them: their inner ops must still be autocast (the
    CPU lists name matmul, not einsum or tensordot, whose decompositions call bmm/mm)."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.matmul(a, b), torch.einsum("ij,jk->ik", a, b), torch.tensordot(a, b, dims=1)

    a, b = mats()

    @functools.cache
    def program() -> Callable[..., Any]:
        return _exported(fn, (a, b), strict=False).run_decompositions().module()

    return run_twice(lambda: ctx.outputs(program()(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


@scenario("export-under-ambient-autocast")
def _export_under_ambient(ctx: Setting) -> ScenarioOutcome:
    """A function with no region of its own, exported inside an eager autocast region: the
    program records no casts. Called outside any region it runs in float32, inside one it is
    autocast at run time: eager's dtypes for the same two calls."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    def outside_then_inside(f: Callable[..., torch.Tensor], a: torch.Tensor, b: torch.Tensor) -> list[Any]:
        outside = f(a, b)
        with ac():
            return [outside, f(a, b)]

    a, b = mats()

    @functools.cache
    def programs() -> list[Callable[..., Any]]:
        made = []
        for strict in KINDS:
            with ac():
                made.append(_exported(fn, (a, b), strict).module())
        return made

    def exported() -> Outputs:
        return ctx.outputs(tuple(out for p in programs() for out in outside_then_inside(p, a, b)))

    eager = ctx.outputs(tuple(outside_then_inside(fn, a, b) * len(KINDS)))
    return run_twice(exported, eager, ctx.without_region(a.dtype))


@scenario("export-decomposed-under-ambient-autocast")
def _decomposed_under_ambient(ctx: Setting) -> ScenarioOutcome:
    """The same function exported outside any region, and its run_decompositions() called inside
    an eager autocast region: the decomposition is traced under that region and bakes its casts
    into the program, which then gives bfloat16 wherever it runs (eager, called outside any
    region, gives float32)."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()

    @functools.cache
    def program() -> Callable[..., Any]:
        ep = _exported(fn, (a, b), strict=False)
        with ac():
            return ep.run_decompositions().module()

    return run_twice(lambda: ctx.outputs(program()(a, b)), ctx.outputs(fn(a, b)), ctx.without_region(a.dtype))


@scenario("export-nested-disabled-region")
def _export_nested_disabled(ctx: Setting) -> ScenarioOutcome:
    """A disabled region inside an enabled one, exported: the inner op runs in float32, the ops
    before and after it in the outer region's dtype, in ep.module() and after
    run_decompositions(), for both export kinds."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            x = torch.mm(a, b)
            with torch.autocast(device_type="cpu", enabled=False):
                y = torch.mm(a, b)
            return x, y, torch.mm(a, b)

    a, b = mats()
    programs = _programs(fn, (a, b))
    eager = ctx.outputs(fn(a, b) * 2 * len(KINDS))
    return run_twice(lambda: ctx.outputs(programs()), eager, ctx.without_region(a.dtype))


@scenario("export-decorated-forward")
def _export_decorated(ctx: Setting) -> ScenarioOutcome:
    """The decorator form: a forward decorated with ``@torch.autocast(...)`` calling a method
    decorated with ``@torch.autocast(..., enabled=False)`` (pytorch#131829: export once failed on
    such a forward), exported: eager's dtypes in ep.module() and after run_decompositions()."""

    class Decorated(torch.nn.Module):
        @torch.autocast(device_type="cpu", dtype=torch.bfloat16)
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return torch.mm(a, b), self.inner(a, b)

        @torch.autocast(device_type="cpu", enabled=False)
        def inner(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.mm(a, b)

    a, b = mats()
    model = Decorated()
    programs = _programs(model, (a, b))
    eager = ctx.outputs(model(a, b) * 2 * len(KINDS))
    return run_twice(lambda: ctx.outputs(programs()), eager, ctx.without_region(a.dtype))

"""Bugs of compiled autocast: torch.compile with regions that raise, recompute or disable."""

from __future__ import annotations

import functools
from typing import Any

import torch

from .registry import cpu_autocast, observe, replay, witness

# --- replays ------------------------------------------------------------


@replay
def compile_crashes_on_exception_in_autocast() -> None:
    """Dynamo crashed with an AttributeError when the compiled code raised inside autocast."""
    orig = torch.compile

    def crashing(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                raise AttributeError("'NoneType' object has no attribute 'is_python_constant'") from exc

        return call

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:
            return lambda m: crashing(orig(m, **kwargs))
        return crashing(orig(model, **kwargs))

    torch.compile = compile  # type: ignore[assignment]


# --- witnesses ----------------------------------------------------------


def nesting() -> int:
    n = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return n - 1


@witness
def compiled_exception_in_region() -> Any:
    @torch.compile(backend="eager")
    def f(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
            if y.sum() > -1e9:
                raise NotImplementedError("boom")
            return y

    kind = observe(lambda: f(torch.randn(4, 4)))
    return {"raised": kind.split(":")[1].strip(), "nesting": nesting()}


@witness
def compiled_exception_nesting() -> Any:
    @torch.compile(backend="eager", fullgraph=True)
    def f(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x.index_select(0, idx)

    for _ in range(2):
        observe(lambda: f(torch.randn(4, 4), torch.tensor([99])))
    return {"nesting": nesting(), "enabled": torch.is_autocast_enabled("cpu")}


@witness
def compiled_backward_inner_disabled() -> Any:
    lin = torch.nn.Linear(8, 8)
    h = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)

    def inner(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", enabled=False):
            return x.float() @ lin.weight.float().T

    grads = []
    for fn in (inner, torch.compile(inner, backend="aot_eager")):
        lin.weight.grad = None
        with cpu_autocast():
            out = fn(h)
        out.sum().backward()
        grads.append(lin.weight.grad.clone())
    return torch.equal(grads[0], grads[1])

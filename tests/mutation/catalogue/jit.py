"""JIT mutants: TorchScript's autocast pass off, and ``torch.compile`` leaking autocast
state when an exception escapes."""

from __future__ import annotations

import functools
from typing import Any

import torch

from .mutant import CPU, context_mutant


def _jit_pass_off() -> None:
    torch._C._jit_set_autocast_mode(False)


def _compile_leaks_state_on_exception() -> None:
    orig = torch.compile

    def leaky(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except BaseException:
                torch.set_autocast_enabled("cpu", True)
                raise

        return call

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:
            return lambda m: leaky(orig(m, **kwargs))
        return leaky(orig(model, **kwargs))

    torch.compile = compile  # type: ignore[assignment]


JIT_MUTANTS = [
    context_mutant(
        "jit-autocast-pass-off",
        "jit",
        "TorchScript's autocast pass is off: scripted autocast regions are dropped",
        ("test_jit_limitations.py",),
        _jit_pass_off,
    ),
    context_mutant(
        "compile-leaks-state",
        "jit",
        "an exception escaping a compiled function leaves CPU autocast enabled",
        ("test_jit_limitations.py", "test_modes.py"),
        _compile_leaks_state_on_exception,
        keyword="compile",
        options=(*CPU, "--mode", "compile"),
    ),
]

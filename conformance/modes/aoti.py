"""``--mode aoti``: every catalogued op exported inside an autocast region and compiled ahead of
time by AOTInductor (``torch._inductor.aoti_compile_and_package``), the package loaded back
(``aoti_load_package``) and run.

One package per dtype and input kind holds every op (a batch, :mod:`.batch`: a C++ build per
op would take hours); a batch that fails is split in halves down to one package per op, so the
op that fails alone carries the error. The packages live in the run's inductor cache directory
(``--compile-cache``), next to the compiled code a warm run reuses.

Per op: the output dtypes exactly as eager autocast's (or as ``spec/compiled.yaml``
``mode_divergences.aoti`` declares), then the values within the op's tolerance (or as a
``value_divergences`` entry with ``mode: aoti`` declares).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from reference_impl.engine.dtypes import dtype_of

from ..kit.verdict import Observation
from ..target import Target
from .batch import Call, batch_outcomes, run_batch
from .ops import ModeCase, batch_calls, eager_result, inputs_of, judge
from .run import aoti_compiled

MODE = "aoti"
BACKEND = "inductor"  # the compiler behind the packages (a value divergence's backend)
WHERE = "aoti (non-strict export, AOTInductor package)"


def unavailable() -> str | None:
    """Why AOTInductor cannot run here (no API in this torch, no C++ compiler), else None."""
    import torch._inductor as inductor  # here, not at import: it costs about 1.4 s
    from torch._inductor import cpp_builder

    for name in ("aoti_compile_and_package", "aoti_load_package"):
        if not hasattr(inductor, name):
            return f"this torch ({torch.__version__}) has no torch._inductor.{name} (AOTInductor)"
    try:
        cpp_builder.get_cpp_compiler()
    except Exception as exc:  # InvalidCxxCompiler, or what a broken toolchain raises
        return f"AOTInductor needs a C++ compiler (set CXX): {type(exc).__name__}: {exc}".strip()
    return None


def aoti_runner(fn: Callable[..., Any], tensors: list[torch.Tensor]) -> Sequence[Any]:
    """A batch's function exported, compiled into one package, loaded and run: one result per op."""
    return tuple(aoti_compiled(fn, tensors)(*tensors))


def result(target: Target, mc: ModeCase) -> Any:
    """The op's result from its batch's package (or the error of the smallest batch holding it
    that failed); an op that joined no batch (declared to fail) is compiled alone."""
    dtype = dtype_of(mc.dtype)
    key = (MODE, target.device, mc.dtype, mc.inputs)
    calls: Callable[[], Sequence[Call]] = lambda: batch_calls(target, mc, BACKEND)  # noqa: E731
    outcomes = batch_outcomes(key, calls, target.device, dtype, aoti_runner)
    if mc.op in outcomes:
        return outcomes[mc.op]
    alone = [Call(mc.op, lambda: inputs_of(target, mc))]
    return run_batch(alone, target.device, dtype, aoti_runner)[mc.op]


def matches_eager(target: Target, mc: ModeCase) -> Observation:
    """The op's output dtypes and values from its AOTInductor package against eager autocast."""
    eager = eager_result(target, mc, BACKEND)
    if isinstance(eager, Observation):
        return eager
    return judge(target, mc, BACKEND, eager, result(target, mc), WHERE)

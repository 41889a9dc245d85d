"""Many op calls compiled as one graph: one region per dtype and input kind (``--mode compile``).

Compiling each catalogued op on its own costs one Dynamo trace and one backend compile per
op (inductor: a C++ build each). A batch puts every op of one (dtype, input kind) in one
function, each op on its own inputs inside one ``torch.autocast`` region, and returns every
op's result: per-op attribution stays exact (op ``i``'s result is output ``i``; ops share no
tensors). Dtypes do not depend on the batch; the last bits of a float32 reduction may (inductor
may vectorise or order it otherwise in a bigger graph: ``linalg_cond.p_str``'s declaration in
``spec/compiled.yaml`` records one such case).

When the batch fails (an op Dynamo cannot trace, a lowering error), it is split in halves and
each half is compiled on its own, down to one graph per op: the op that fails alone carries
the error as its observation, the others keep their results.

A **pass** is how a mode runs: its backend and its configuration (:class:`Config`: ``default``;
inductor's ``emulate_precision_casts``, where it rounds where eager rounds; export's
``decomposed``, the program after ``run_decompositions()``).
"""

from __future__ import annotations

import contextlib
import enum
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..harness.samples import Materialized
from .run import call_text, module_fn, parts, region_source


class Config(enum.Enum):
    """A mode's configuration in a pass."""

    DEFAULT = "default"
    EMULATE = "emulate_precision_casts"  # inductor rounds where eager rounds (an inductor config)
    DECOMPOSED = "decomposed"  # export: the program after ep.run_decompositions()


INDUCTOR_CONFIGS: tuple[Config, ...] = (Config.DEFAULT, Config.EMULATE)
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


@dataclass(frozen=True)
class Pass:
    """How a compiled mode runs: the ``torch.compile`` backend and its configuration."""

    backend: str
    config: Config = Config.DEFAULT

    @contextlib.contextmanager
    def configured(self) -> Iterator[None]:
        """The compiler's configuration for this pass (read when a graph compiles)."""
        if self.config is not Config.EMULATE:
            yield
            return
        import torch._inductor.config as inductor_config  # here: costly to import (see run.py)

        with inductor_config.patch({self.config.value: True}):
            yield


@dataclass(frozen=True)
class Call:
    """One op's call in a batch: its name and how to make its inputs (fresh per attempt)."""

    op: str
    inputs: Callable[[], Materialized]


@dataclass
class Timing:
    """What compiling the batches of this process cost."""

    graphs: int = 0  # graphs compiled (batches, halves and single ops)
    seconds: float = 0.0


TIMING = Timing()


def batch_function(
    calls: Sequence[Call], device: str, dtype: torch.dtype
) -> tuple[Callable[..., Any], list[torch.Tensor]]:
    """A generated function calling every op of ``calls`` in one autocast region, and its tensors."""
    tensors: list[torch.Tensor] = []
    body = []
    for i, c in enumerate(calls):
        m = c.inputs()
        _, s_args, s_kwargs = parts(m.args, m.kwargs, tensors)
        body.append(f"r{i} = {call_text(c.op, s_args, s_kwargs)}")
    result = "(" + "".join(f"r{i}, " for i in range(len(calls))) + ")"
    return module_fn(region_source(body, result, len(tensors), device, dtype)), tensors


Runner = Callable[[Callable[..., Any], list[torch.Tensor]], Sequence[Any]]


def compiled_runner(how: Pass) -> Runner:
    """Compile a batch's function under ``how`` and run it: one result per call."""

    def run(fn: Callable[..., Any], tensors: list[torch.Tensor]) -> Sequence[Any]:
        compiled = torch.compile(fn, backend=how.backend, dynamic=False, fullgraph=True)
        with how.configured():
            return tuple(compiled(*tensors))

    return run


def _attempt(calls: Sequence[Call], device: str, dtype: torch.dtype, runner: Runner) -> Sequence[Any]:
    fn, tensors = batch_function(calls, device, dtype)
    start = time.perf_counter()
    try:
        return runner(fn, tensors)
    finally:
        TIMING.graphs += 1
        TIMING.seconds += time.perf_counter() - start


def run_batch(calls: Sequence[Call], device: str, dtype: torch.dtype, runner: Runner) -> dict[str, Any]:
    """Each call's op -> its result in the batch (``runner``: how a batch's function runs), or
    the exception of the smallest batch holding it that failed (the op alone)."""
    if not calls:
        return {}
    try:
        results = _attempt(calls, device, dtype, runner)
    except Exception as exc:  # a failing batch is split; a failing single op is its observation
        if len(calls) == 1:
            return {calls[0].op: exc}
        half = len(calls) // 2
        return {
            **run_batch(calls[:half], device, dtype, runner),
            **run_batch(calls[half:], device, dtype, runner),
        }
    return {c.op: r for c, r in zip(calls, results, strict=True)}


_OUTCOMES: dict[tuple[Any, ...], dict[str, Any]] = {}


def batch_outcomes(
    key: tuple[Any, ...], calls: Callable[[], Sequence[Call]], device: str, dtype: torch.dtype, runner: Runner
) -> dict[str, Any]:
    """The outcomes of the batch ``key`` names, run once per process (``calls`` is only called
    then)."""
    if key not in _OUTCOMES:
        _OUTCOMES[key] = run_batch(calls(), device, dtype, runner)
    return _OUTCOMES[key]


def use_cache_dir(chosen: str | None) -> str:
    """One inductor cache directory for the run: ``chosen`` (``--compile-cache``: reuse it for
    a warm run), else the one the environment names, else a new temporary one. Set in the
    environment, where the workers of a distributed run inherit it."""
    path = chosen or os.environ.get(CACHE_ENV) or tempfile.mkdtemp(prefix="autocast_inductor_")
    os.environ[CACHE_ENV] = path
    return path

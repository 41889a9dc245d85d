"""Overhead of reference_impl.autocast vs torch.autocast on real architectures (Hugging Face).

Tiny BERT, GPT-2, Llama, T5, ViT and ConvNeXt models built from configs with random
weights (``benchmarks/hf_models.py``; needs ``pip install -e ".[bench]"``), batch 2,
one training step each: a region around the forward pass and the loss, backward after
it. Native and reference steps alternate (paired runs, the order flipped every pair),
so drift in machine load hits both alike; the figure per model and dtype is the median
of the per-pair ratios. Then the cost of entering and leaving an empty region, native
and reference. Nothing is asserted: the script prints figures (targets: each model
<= 1.2x, region enter+exit <= 0.05 ms).

    python benchmarks/bench_models.py [--pairs 30] [--models bert,gpt2] [--dtypes bfloat16,float16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import hf_models
import torch

import reference_impl

Region = Callable[[], Any]


def step(model: torch.nn.Module, inputs: dict[str, torch.Tensor], region: Region) -> float:
    start = time.perf_counter()
    with region():
        loss = hf_models.loss_of(model, inputs)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def paired(name: str, dtype: torch.dtype, pairs: int, warmup: int) -> tuple[float, float, float]:
    """(native median s, reference median s, median of the per-pair ratios)."""
    model, inputs = hf_models.build(name)

    def native() -> Any:
        return torch.autocast("cpu", dtype=dtype)

    def reference() -> Any:
        return reference_impl.autocast("cpu", dtype=dtype)

    for _ in range(warmup):
        step(model, inputs, native)
        step(model, inputs, reference)
    nat, ref, ratios = [], [], []
    for i in range(pairs):
        order = (native, reference) if i % 2 == 0 else (reference, native)
        times = {fn: step(model, inputs, fn) for fn in order}
        nat.append(times[native])
        ref.append(times[reference])
        ratios.append(times[reference] / times[native])
    return statistics.median(nat), statistics.median(ref), statistics.median(ratios)


def empty_region(region: Region, n: int = 2000) -> float:
    """Median seconds to enter and leave an empty region (batches of 100)."""
    samples = []
    for _ in range(n // 100):
        start = time.perf_counter()
        for _ in range(100):
            with region():
                pass
        samples.append((time.perf_counter() - start) / 100)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", default=",".join(hf_models.MODELS), help="comma-separated, of: %(default)s")
    p.add_argument("--dtypes", default="bfloat16,float16")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    names = a.models.split(",")
    unknown = [n for n in names if n not in hf_models.MODELS]
    if unknown:
        print(
            f"error: --models: unknown {unknown}; choose from {','.join(hf_models.MODELS)}", file=sys.stderr
        )
        return 2
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {a.pairs} paired fwd+bwd steps, "
        f"batch {hf_models.BATCH}; load average before: {os.getloadavg()[0]:.2f}"
    )
    print(f"  {'model':9s} {'dtype':9s} {'native ms':>10s} {'ref ms':>10s} {'ratio':>7s}")
    worst = 0.0
    for name in names:
        for dname in a.dtypes.split(","):
            nat, ref, ratio = paired(name, getattr(torch, dname), a.pairs, a.warmup)
            worst = max(worst, ratio)
            print(f"  {name:9s} {dname:9s} {nat * 1e3:10.2f} {ref * 1e3:10.2f} {ratio:6.3f}x")
    print(f"  worst ratio: {worst:.3f}x  (target <= 1.2x)")
    nat_region = empty_region(lambda: torch.autocast("cpu"))
    ref_region = empty_region(lambda: reference_impl.autocast("cpu"))
    print(
        f"  empty region enter+exit: native {nat_region * 1e3:.4f} ms, reference {ref_region * 1e3:.4f} ms "
        "(target <= 0.05 ms)"
    )
    print(f"  load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

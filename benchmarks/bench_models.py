"""Overhead of reference_impl.autocast vs torch.autocast on real architectures (Hugging Face).

Tiny BERT, GPT-2, Llama, T5, ViT and ConvNeXt models built from configs with random
weights (``benchmarks/hf_models.py``; needs ``pip install -e ".[bench]"``), batch 2,
one training step each: a region around the forward pass and the loss, backward after
it. Native and reference steps alternate (paired runs, the order flipped every pair),
so drift in machine load hits both alike; the figure per model and dtype is the median
of the per-pair ratios. A step's time is this process's CPU time by default (one torch
thread: the work done, robust to waiting for a core on a shared machine; ``--clock wall``
for elapsed time). Then the cost of entering and leaving an empty region, native and
reference. Nothing is asserted: the script prints figures (targets: each model <= 1.2x,
region enter+exit <= 0.05 ms).

    python benchmarks/bench_models.py [--pairs 30] [--models bert,gpt2] [--dtypes bfloat16,float16]
                                      [--threads 1] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import hf_models
import torch
from paired import Paired, empty_region, paired

import reference_impl

Clock = Callable[[], float]


# cpu: this process's CPU time (with one thread: the work done, not the time spent waiting
# for a core on a shared machine); wall: elapsed time.
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def measure(name: str, dtype: torch.dtype, pairs: int, warmup: int, clock: Clock) -> Paired:
    model, inputs = hf_models.build(name)
    return paired(
        lambda region: hf_models.step(model, inputs, region, clock),
        lambda: torch.autocast("cpu", dtype=dtype),
        lambda: reference_impl.autocast("cpu", dtype=dtype),
        pairs,
        warmup,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", default=",".join(hf_models.MODELS), help="comma-separated, of: %(default)s")
    p.add_argument("--dtypes", default="bfloat16,float16")
    # Tiny models at batch 2 gain nothing from intra-op threads; on a shared machine a second
    # thread only adds scheduling noise to both sides. 0 leaves torch's default.
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (0: leave as is)")
    p.add_argument(
        "--clock", choices=sorted(CLOCKS), default="cpu", help="what a step's time is (default: %(default)s)"
    )
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    error = hf_models.unknown_names(a.models)
    if error:
        print(error, file=sys.stderr)
        return 2
    names = a.models.split(",")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {a.pairs} paired fwd+bwd steps "
        f"({a.clock} time), "
        f"batch {hf_models.BATCH}; load average before: {os.getloadavg()[0]:.2f}"
    )
    print(f"  {'model':9s} {'dtype':9s} {'native ms':>10s} {'ref ms':>10s} {'ratio':>7s}")
    worst = 0.0
    for name in names:
        for dname in a.dtypes.split(","):
            r = measure(name, getattr(torch, dname), a.pairs, a.warmup, CLOCKS[a.clock])
            worst = max(worst, r.ratio)
            print(f"  {name:9s} {dname:9s} {r.native * 1e3:10.2f} {r.reference * 1e3:10.2f} {r.ratio:6.3f}x")
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

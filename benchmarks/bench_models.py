"""Overhead of reference_impl.autocast vs torch.autocast on real architectures (Hugging Face).

Tiny BERT, GPT-2, Llama, T5, ViT and ConvNeXt models built from configs with random
weights (``benchmarks/hf_models.py``; needs ``pip install -e ".[bench]"``), batch 2,
one training step each: a region around the forward pass and the loss, backward after
it. Native and reference steps alternate (paired runs, the order flipped every pair),
so drift in machine load hits both alike; the figure per model and dtype is the median
of the per-pair ratios. A step's time is this process's CPU time by default (one torch
thread: the work done, robust to waiting for a core on a shared machine; ``--clock wall``
for elapsed time).

One process's figure moves by a few percent from one process to the next (where the
interpreter and torch land in memory), more than the pairs' own spread; so the script runs
``--processes`` fresh worker processes one after another (as pyperf does) and reports, per
model and dtype, the median of the workers' figures and their range. Then the cost of
entering and leaving an empty region, native and reference. Nothing is asserted: the
script prints figures (targets: each model <= 1.2x, region enter+exit <= 0.05 ms).

    python benchmarks/bench_models.py [--pairs 30] [--processes 3] [--models bert,gpt2]
                                      [--dtypes bfloat16,float16] [--threads 1] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import hf_models
import torch
from paired import Paired, empty_region, paired

import reference_impl
from reference_impl.kernels import fast_kernels

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


def worker(a: argparse.Namespace) -> dict[str, list[float]]:
    """This process's figures: "model dtype" -> [native s, reference s, ratio]."""
    if a.threads:
        torch.set_num_threads(a.threads)
    out = {}
    for name in a.models.split(","):
        for dname in a.dtypes.split(","):
            r = measure(name, getattr(torch, dname), a.pairs, a.warmup, CLOCKS[a.clock])
            out[f"{name} {dname}"] = [r.native, r.reference, r.ratio]
    return out


def run_workers(a: argparse.Namespace, argv: list[str]) -> list[dict[str, list[float]]]:
    """``a.processes`` fresh processes of this script, one after another, each printing its
    figures as JSON."""
    cmd = [sys.executable, os.path.abspath(__file__), *argv, "--processes", "1", "--worker"]
    results = []
    for i in range(a.processes):
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(f"worker process {i + 1} failed (exit {done.returncode})")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=30, help="paired steps per model, dtype and process")
    p.add_argument("--processes", type=int, default=3, help="fresh worker processes (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", default=",".join(hf_models.MODELS), help="comma-separated, of: %(default)s")
    p.add_argument("--dtypes", default="bfloat16,float16")
    # Tiny models at batch 2 gain nothing from intra-op threads; on a shared machine a second
    # thread only adds scheduling noise to both sides. 0 leaves torch's default.
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (0: leave as is)")
    p.add_argument(
        "--clock", choices=sorted(CLOCKS), default="cpu", help="what a step's time is (default: %(default)s)"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # one worker: JSON out
    args = sys.argv[1:] if argv is None else argv
    a = p.parse_args(args)
    error = hf_models.unknown_names(a.models)
    if error or a.processes < 1 or a.pairs < 1:
        print(error or "error: --processes and --pairs must be at least 1", file=sys.stderr)
        return 2
    if a.worker:
        print(json.dumps(worker(a)))
        return 0
    kernels = "C++" if fast_kernels.extension() is not None else "Python"  # built before timing
    print(
        f"torch {torch.__version__}, reference kernels: {kernels}, "
        f"{a.threads or torch.get_num_threads()} threads, {a.processes} processes x "
        f"{a.pairs} paired fwd+bwd steps ({a.clock} time), batch {hf_models.BATCH}; "
        f"load average before: {os.getloadavg()[0]:.2f}"
    )
    runs = run_workers(a, args) if a.processes > 1 else [worker(a)]
    print(f"  {'model':9s} {'dtype':9s} {'native ms':>10s} {'ref ms':>10s} {'ratio':>7s}  processes")
    worst = 0.0
    for key in runs[0]:
        nat, ref, ratio = (statistics.median(r[key][i] for r in runs) for i in range(3))
        spread = sorted(r[key][2] for r in runs)
        worst = max(worst, ratio)
        name, dname = key.split()
        print(
            f"  {name:9s} {dname:9s} {nat * 1e3:10.2f} {ref * 1e3:10.2f} {ratio:6.3f}x  "
            f"{spread[0]:.3f}-{spread[-1]:.3f}"
        )
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

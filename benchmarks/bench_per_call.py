"""What one autocast op call costs: native, the reference's C++ kernels, its Python kernels.

A hot loop of ``F.linear`` on a [2, 8] input under a bfloat16 region, in three kinds of call:
float32 arguments (three casts, the weight and bias from the weight cache), bfloat16
arguments (nothing to cast) and float64 arguments (left alone). Each figure is the best of
five loops of 20,000 calls, in microseconds per call, native and reference in the same
process. The reference's kernels are chosen once per process, so the script runs itself
twice: once with the C++ kernels and once with ``REFERENCE_AUTOCAST_CPP=0`` (the Python
kernels). Nothing is asserted: the script prints figures.

    python benchmarks/bench_per_call.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import reference_impl
from reference_impl.kernels import fast_kernels


def _calls() -> dict[str, Callable[[], torch.Tensor]]:
    x, w, b = torch.randn(2, 8), torch.randn(8, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    xb, wb, bb = x.bfloat16(), w.detach().bfloat16(), b.detach().bfloat16()
    xd, wd = x.double(), w.detach().double()
    return {
        "float32 (3 casts)": lambda: F.linear(x, w, b),
        "bfloat16 (none)": lambda: F.linear(xb, wb, bb),
        "float64 (left alone)": lambda: F.linear(xd, wd),
    }


def _per_call(region: Callable[[], Any], fn: Callable[[], torch.Tensor], calls: int) -> float:
    best = float("inf")
    for _ in range(5):
        with region():
            for _ in range(200):
                fn()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def worker(calls: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    out: dict[str, Any] = {"kernels": "C++" if fast_kernels.extension() is not None else "Python"}
    for name, fn in _calls().items():
        out[name] = (
            _per_call(lambda: torch.autocast("cpu", dtype=torch.bfloat16), fn, calls),
            _per_call(lambda: reference_impl.autocast("cpu", dtype=torch.bfloat16), fn, calls),
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(a.calls)))
        return 0
    runs = []
    for env in ({}, {fast_kernels.ENV: "0"}):
        cmd = [sys.executable, os.path.abspath(__file__), "--calls", str(a.calls), "--worker"]
        done = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    cpp, py = runs
    print(f"torch {torch.__version__}, 1 thread, F.linear [2, 8] under bfloat16, us per call (best of 5)")
    print(f"  {'arguments':22s} {'native':>7s} {cpp['kernels']:>7s} {'native':>7s} {py['kernels']:>7s}")
    for name in _calls():
        (n1, r1), (n2, r2) = cpp[name], py[name]
        print(f"  {name:22s} {n1:7.2f} {r1:7.2f} {n2:7.2f} {r2:7.2f}")
    print("  (each pair of columns is one process: native, then the reference in it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

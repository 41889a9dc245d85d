"""Overhead of reference_impl.autocast vs torch.autocast on a transformer encoder block.

Each iteration opens a region, runs the forward pass, and runs backward after
it (the usual training step shape). Native and reference iterations alternate
(paired runs, ``benchmarks/paired.py``), so drift in machine load hits both alike;
the figure is the median of the per-pair ratios. Nothing is asserted: the script
prints figures. For real architectures see ``benchmarks/bench_models.py``.

    python benchmarks/bench_reference.py [--pairs 60] [--dtype bfloat16] [--size small|medium]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from paired import empty_region, paired
from torch import nn

import reference_impl

SIZES = {"small": (2, 16, 64, 4), "medium": (8, 64, 256, 8), "large": (16, 128, 512, 8)}


class EncoderBlock(nn.Module):
    def __init__(self, d: int, heads: int, classes: int = 10) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, need_weights=True)
        x = x + a
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return F.cross_entropy(self.head(x).flatten(0, 1), target.flatten())


def step(model: nn.Module, x: torch.Tensor, t: torch.Tensor, region: Callable[[], Any]) -> float:
    start = time.perf_counter()
    with region():
        loss = model(x, t)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dtype", choices=["bfloat16", "float16"], default="bfloat16")
    p.add_argument("--size", choices=sorted(SIZES), default="medium")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave as is)")
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    dtype = getattr(torch, a.dtype)
    batch, seq, d, heads = SIZES[a.size]
    torch.manual_seed(0)
    model = EncoderBlock(d, heads)
    x = torch.randn(batch, seq, d)
    t = torch.randint(0, 10, (batch, seq))

    def native() -> Any:
        return torch.autocast("cpu", dtype=dtype)

    def reference() -> Any:
        return reference_impl.autocast("cpu", dtype=dtype)

    r = paired(lambda region: step(model, x, t, region), native, reference, a.pairs, a.warmup)
    empty = {fn: empty_region(fn) for fn in (native, reference)}
    ms = 1e3
    print(
        f"encoder block {a.size} (batch {batch}, seq {seq}, d {d}, heads {heads}), {a.dtype}, "
        f"{a.pairs} paired fwd+bwd steps, torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    print(f"  native    median {r.native * ms:8.3f} ms")
    print(f"  reference median {r.reference * ms:8.3f} ms")
    print(
        f"  empty region enter+exit: native {empty[native] * ms:.4f} ms, "
        f"reference {empty[reference] * ms:.4f} ms (target <= 0.05 ms)"
    )
    print(f"  overhead ratio (median of paired ratios): {r.ratio:.3f}x  (target <= 1.1x)")
    print(f"  load average: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

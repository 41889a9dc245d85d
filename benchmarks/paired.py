"""Paired timing shared by the benchmarks: alternate native and reference, report ratios.

Native and reference runs alternate (the order flipped every pair), so drift in
machine load hits both alike; the figure is the median of the per-pair ratios.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Region = Callable[[], Any]  # a region factory: ``lambda: torch.autocast("cpu")``


@dataclass(frozen=True)
class Paired:
    native: float  # median seconds
    reference: float
    ratio: float  # median of the per-pair reference / native ratios


def paired(
    run: Callable[[Region], float], native: Region, reference: Region, pairs: int, warmup: int
) -> Paired:
    """``run(region)`` returns the seconds of one step under ``region()``."""
    for _ in range(warmup):
        run(native)
        run(reference)
    nat, ref, ratios = [], [], []
    for i in range(pairs):
        order = (native, reference) if i % 2 == 0 else (reference, native)
        times = {fn: run(fn) for fn in order}
        nat.append(times[native])
        ref.append(times[reference])
        ratios.append(times[reference] / times[native])
    return Paired(statistics.median(nat), statistics.median(ref), statistics.median(ratios))


def empty_region(region: Region, n: int = 2000) -> float:
    """Median seconds to enter and leave an empty region (timed in batches of 100)."""
    samples = []
    for _ in range(max(1, n // 100)):
        start = time.perf_counter()
        for _ in range(100):
            with region():
                pass
        samples.append((time.perf_counter() - start) / 100)
    return statistics.median(samples)

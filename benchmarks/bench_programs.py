"""What a generated autocast program costs per pass: programs per second, cold and warm.

Draws ``--programs`` programs (``reference_impl.programs.programs``, cpu, the device's default
dtype, a fixed ``--seed``) and runs them all through each pass of ``--passes`` in a child
process of its own (``reference_impl.programs.run``: the program eagerly and through the pass),
twice: with a new inductor cache directory (``TORCHINDUCTOR_CACHE_DIR``: cold) and again, in a
new process, with the same directory (warm: what a rerun of the same budget costs). Drawing the
programs is timed apart. Nothing is asserted: the script prints figures, so that the suite's
default budgets can be set from them.

    python benchmarks/bench_programs.py --programs 20 --passes eager,aot_eager,export-strict
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

from reference_impl.programs import PASSES, run
from reference_impl.programs.strategies import drawn_programs
from reference_impl.spectools.installed_spec import load_installed_spec


def worker(pass_name: str, n: int, at: int) -> dict[str, Any]:
    warnings.filterwarnings("ignore")
    spec = load_installed_spec()
    start = time.perf_counter()
    drawn = drawn_programs(spec, n, at)
    drawing = time.perf_counter() - start
    statuses: collections.Counter[str] = collections.Counter()
    start = time.perf_counter()
    for p in drawn:
        statuses[run(p, pass_name, spec).status] += 1
    took = time.perf_counter() - start
    return {"draw_s": drawing, "run_s": took, "programs": len(drawn), "statuses": dict(statuses)}


def child(pass_name: str, n: int, at: int, cache: str) -> dict[str, Any]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", pass_name, "--programs", str(n), "--seed", str(at)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--passes", default=",".join(PASSES))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.programs, a.seed)))
        return 0
    print(f"{a.programs} programs (seed {a.seed}), cpu; cold: a new inductor cache, warm: the same again")
    print(f"{'pass':34} {'cold s':>8} {'prog/s':>7} {'warm s':>8} {'prog/s':>7}  statuses")
    for name in a.passes.split(","):
        with tempfile.TemporaryDirectory(prefix="bench_programs_") as cache:
            cold = child(name, a.programs, a.seed, cache)
            warm = child(name, a.programs, a.seed, cache)
        n = cold["programs"]
        print(
            f"{name:34} {cold['run_s']:8.1f} {n / cold['run_s']:7.2f} {warm['run_s']:8.1f} "
            f"{n / warm['run_s']:7.2f}  {cold['statuses']} (drawing: {cold['draw_s']:.1f} s)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

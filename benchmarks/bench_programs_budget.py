"""What the programs category's default budget costs per pass, through pytest as a user runs it.

For each selection below, runs ``pytest conformance/test_programs.py --backend cpu --dtype all``
with the selection's options and ``-n WORKERS``, in a new inductor cache directory (cold), and
prints the wall time and the outcome counts; ``--main-job`` also times the main job
(``pytest conformance --backend cpu``) with and without the category (``-m "not programs"``), the
growth the category adds. Nothing is asserted: the figures go to docs/jit.md.

    python benchmarks/bench_programs_budget.py --workers 2 --main-job
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

SELECTIONS: dict[str, tuple[str, ...]] = {
    "without --mode (aot_eager)": (),
    "compile aot_eager": ("--mode", "compile"),
    "compile inductor": ("--mode", "compile", "--compile-backend", "inductor"),
    "export": ("--mode", "export"),
    "aoti": ("--mode", "aoti"),
}
COUNTS = re.compile(r"(\d+) (passed|failed|xfailed|skipped|error)")


def timed(args: list[str]) -> tuple[float, str]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="bench-programs-")}
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "pytest", *args], capture_output=True, text=True, env=env)
    took = time.perf_counter() - start
    last = p.stdout.splitlines()[-1] if p.stdout else ""
    counts = ", ".join(f"{n} {what}" for n, what in COUNTS.findall(last))
    return took, counts or f"exit {p.returncode}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", action="append", default=[], help="a selection's name (repeatable)")
    ap.add_argument("--main-job", action="store_true", help="also the main job, with and without programs")
    a = ap.parse_args()
    common = ["-q", "-p", "no:cacheprovider", "--backend", "cpu", "--dtype", "all", "--programs-shrink", "0"]
    for name, options in SELECTIONS.items():
        if a.only and name not in a.only:
            continue
        workers = ["-n", str(a.workers)] if a.workers > 1 else []
        took, counts = timed(["conformance/test_programs.py", *common, *options, *workers])
        print(f"{name:28s} {took:7.1f} s  {counts}", flush=True)
    if a.main_job:
        for name, extra in (("main job without programs", ["-m", "not programs"]), ("main job", [])):
            took, counts = timed(["conformance", "--backend", "cpu", "-q", "-p", "no:cacheprovider", *extra])
            print(f"{name:28s} {took:7.1f} s  {counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

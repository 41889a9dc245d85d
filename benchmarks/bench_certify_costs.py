"""Measure the cost table that balances ``--certify-shard`` (``conformance/certify/costs.json``).

Certifies the suite with each command of ``RUNS`` (one xdist worker each, as ``--certify``
runs without ``-n``: durations not inflated by a neighbouring worker), or reads the bundles
given with ``--from``, and writes:

* ``costs``: per cost key (:func:`conformance.certify.shard.cost_key`: a test function, with
  its mode and compile backend where it has them, or a compiled batch) the mean seconds per
  test, pooled over the runs;
* ``default_s``: per mode (``compile@<backend>``) the mean seconds per test of that mode, and
  ``*`` over every test: the cost of a test whose key the table does not know;
* ``overhead_s``: per test, what a run spends beyond the tests' own durations (xdist's dispatch,
  the reports, the recording): ``(wall - collection - sum of durations) / tests``, pooled over
  the runs, the collection timed by collecting alone (``--certify-list``, as verify-bundle does).

Prints the ten costliest keys and the totals; writes the table with ``--write``.

    python benchmarks/bench_certify_costs.py [--from BUNDLE ...] [--write conformance/certify/costs.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

from conformance.certify.identity import CollectedTest
from conformance.certify.listing import regenerate
from conformance.certify.shard import ANY_MODE, COSTS, cost_key

ROOT = Path(__file__).resolve().parent.parent
# The certifications measured: eager, and the modes that run here without a C++ toolchain.
RUNS = (
    ("--backend", "cpu", "--dtype", "all"),
    ("--backend", "cpu", "--dtype", "all", "--mode", "script", "--mode", "trace", "--mode", "compile"),
)


def certify(args: tuple[str, ...], out: Path) -> Path:
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", *args]
    cmd += ["--certify", str(out)]
    print("$", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if not (out / "results.json").is_file():
        sys.exit(f"the certification wrote no bundle (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
    print(f"  {time.perf_counter() - t0:.1f} s", flush=True)
    return out


def measure(bundle: Path) -> tuple[dict[str, Any], list[tuple[str, str, float]]]:
    """The run's record, and (cost key, mode key, seconds) per test."""
    meta = json.loads((bundle / "certification.json").read_text())
    tests = json.loads((bundle / "results.json").read_text())["tests"]
    rows = []
    for t in tests:
        ct = CollectedTest(t["id"], mode=t.get("mode", "eager"))
        rows.append((cost_key(ct), ct.mode, float(t["duration"])))
    t0 = time.perf_counter()
    regenerate(meta, bundle)  # the collection alone, with the recorded options
    collect_s = time.perf_counter() - t0
    run = {
        "args": meta["invocation"]["worker_args"],
        "tests": len(tests),
        "workers": meta["workers"],
        "wall_s": meta["wall_s"],
        "collect_s": round(collect_s, 2),
        "durations_s": round(sum(r[2] for r in rows), 2),
    }
    return run, rows


def table(runs: list[dict[str, Any]], rows: list[tuple[str, str, float]]) -> dict[str, Any]:
    by_key: dict[str, list[float]] = defaultdict(list)
    by_mode: dict[str, list[float]] = defaultdict(list)
    for key, mode, s in rows:
        by_key[key].append(s)
        by_mode[mode].append(s)
    serial = [r for r in runs if r["workers"] == 1]
    spare = sum(r["wall_s"] - r["collect_s"] - r["durations_s"] for r in serial)
    overhead = max(0.0, spare / max(1, sum(r["tests"] for r in serial)))
    mean = lambda xs: round(sum(xs) / len(xs), 5)  # noqa: E731
    return {
        "about": "seconds per test that balance --certify-shard; benchmarks/bench_certify_costs.py wrote it",
        "measured": {"torch": torch.__version__, "runs": runs},
        "overhead_s": round(overhead, 5),
        "default_s": {ANY_MODE: mean([r[2] for r in rows])}
        | {m: mean(v) for m, v in sorted(by_mode.items())},
        "costs": {k: mean(v) for k, v in sorted(by_key.items())},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="bundles", nargs="+", type=Path, help="read these bundles, run nothing")
    suites = COSTS.relative_to(ROOT)
    ap.add_argument("--write", type=Path, help=f"write the table here (the suite's: {suites})")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-certify-costs-") as tmp:
        bundles = a.bundles or [certify(args, Path(tmp) / f"run{i}") for i, args in enumerate(RUNS)]
        measured = [measure(b) for b in bundles]
    runs = [m[0] for m in measured]
    rows = [r for m in measured for r in m[1]]
    t = table(runs, rows)
    for r in runs:
        print(
            f"{' '.join(r['args'])}: {r['tests']} tests, {r['workers']} worker(s), wall {r['wall_s']} s, "
            f"collection {r['collect_s']} s, test durations {r['durations_s']} s"
        )
    print(f"per-test overhead {t['overhead_s'] * 1000:.1f} ms; defaults per mode (s/test): {t['default_s']}")
    totals: dict[str, float] = defaultdict(float)
    for key, _, s in rows:
        totals[key] += s
    print("costliest keys (seconds over the runs, tests, s/test):")
    for key, s in sorted(totals.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {s:8.2f}  {key}  ({t['costs'][key]} s/test)")
    if a.write:
        a.write.write_text(json.dumps(t, indent=1, sort_keys=True) + "\n")
        print(f"wrote {a.write}")


if __name__ == "__main__":
    main()

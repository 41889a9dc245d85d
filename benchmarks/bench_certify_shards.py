"""A certification run whole and in shards: wall times, and whether the merged bundles equal it.

For one certification (the arguments after ``--``; default ``--backend cpu --dtype all``):

1. certify it unsharded (``--certify``), and verify the bundle;
2. for each N of ``--shards`` (default 2 and 4): certify each shard ``--certify-shard K/N`` as a
   separate process, one after another (each stands for one machine of a CI matrix), merge them
   with ``autocast-spec merge-bundles`` and verify the merged bundle;
3. print each process's wall time (a sharded run's wall time on N machines is its slowest shard's,
   plus the merge), the shard's estimate from the cost table, and the counts and verdict of
   every bundle; then whether each merged bundle's counts, verdicts (overall and per mode),
   per-test statuses and verify-bundle's verdict equal the unsharded run's.

Exit 1 when a merged bundle differs from the unsharded one. Figures are printed, never asserted.

    python benchmarks/bench_certify_shards.py [--shards 2 4] [--keep DIR] [-- CERTIFICATION ARGS]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ARGS = ["--backend", "cpu", "--dtype", "all"]


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    print("$", " ".join(cmd[1:] if cmd[0] == sys.executable else cmd), flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return round(time.perf_counter() - t0, 1), p


def certify(args: list[str], out: Path) -> float:
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", *args]
    wall, p = timed([*cmd, "--certify", str(out)])
    if not (out / "results.json").is_file():
        sys.exit(f"no bundle in {out} (exit {p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
    return wall


def cli(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    return timed([sys.executable, "-m", "conformance.cli", *args])


def record(bundle: Path) -> dict[str, Any]:
    meta = json.loads((bundle / "certification.json").read_text())
    tests = json.loads((bundle / "results.json").read_text())["tests"]
    return {
        "counts": {s: n for s, n in meta["counts"].items() if n},
        "verdict": meta["verdict"],
        "mode_verdicts": meta.get("mode_verdicts"),
        "statuses": {t["id"]: t["status"] for t in tests},
        "order": [t["id"] for t in tests],
    }


def verified(bundle: Path) -> tuple[float, list[str]]:
    """verify-bundle's wall time, and its exit code and lines but the first (which names the bundle)."""
    wall, p = cli("verify-bundle", str(bundle))
    return wall, [f"exit {p.returncode}", *p.stdout.strip().splitlines()[1:]]


def run_shards(args: list[str], root: Path, n: int) -> tuple[list[float], float]:
    """Certify the n shards one after another, then merge them; (each shard's wall, the merge's)."""
    walls = []
    for k in range(1, n + 1):
        out = root / f"n{n}-k{k}"
        walls.append(certify([*args, "--certify-shard", f"{k}/{n}"], out))
        shard = json.loads((out / "shard.json").read_text())
        estimate = f"estimated {shard['estimated_s'][k - 1]} s of {shard['estimated_s']}"
        print(f"  shard {k}/{n}: {walls[-1]} s, {len(shard['tests'])} tests, {estimate}", flush=True)
    merge_wall, m = cli(
        "merge-bundles", str(root / f"n{n}"), *(str(root / f"n{n}-k{k}") for k in range(1, n + 1))
    )
    if m.returncode != 0:
        sys.exit(f"merge-bundles refused (exit {m.returncode}):\n{m.stdout}{m.stderr}")
    return walls, merge_wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--keep", type=Path, help="write the bundles here (default: a temporary directory)")
    ap.add_argument("args", nargs="*", help="the certification's options (after --)")
    a = ap.parse_args()
    args = a.args or DEFAULT_ARGS
    with tempfile.TemporaryDirectory(prefix="bench-certify-shards-") as tmp:
        root = a.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        full_wall = certify(args, root / "full")
        full_verify_wall, full_verify = verified(root / "full")
        full = record(root / "full")
        print(f"unsharded: {full_wall} s (verify {full_verify_wall} s), {len(full['order'])} tests")
        print(f"  {full['counts']}; {full_verify[:3]}", flush=True)
        differ = 0
        for n in a.shards:
            walls, merge_wall = run_shards(args, root, n)
            verify_wall, merged_verify = verified(root / f"n{n}")
            merged = record(root / f"n{n}")
            same = merged == full and merged_verify == full_verify
            differ += not same
            print(
                f"{n} shards: slowest {max(walls)} s, all {round(sum(walls), 1)} s, merge {merge_wall} s, "
                f"verify {verify_wall} s; {len(merged['order'])} tests"
            )
            print(f"  {merged['counts']}; {merged_verify[:3]}")
            print(f"  equal to the unsharded run: {'yes' if same else 'NO'}", flush=True)
            if not same:
                ids = [i for i in full["statuses"] if merged["statuses"].get(i) != full["statuses"][i]]
                print(f"  differing statuses: {len(ids)} (e.g. {ids[:3]})")
        return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

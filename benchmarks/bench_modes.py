"""Benchmark the full certification in every mode: where the time goes, cold and warm.

The command timed, the full certification in every mode (issue 40's target: at most 5 minutes
cold, 2 minutes warm on 2 cores)::

    pytest conformance --backend cpu --dtype all -n 2 --mode eager --mode script --mode trace
        --mode compile --compile-backend aot_eager --compile-backend inductor --mode export --mode aoti
        --compile-cache DIR --certify OUT/<label>-bundle

(``--no-certify``: the same run without ``--certify``.)

``run`` times it once from a source tree (``--tree``, default this checkout: give a checkout of
another commit to time the "before" back to back on the same machine). ``--compile-cache DIR``
empty or missing: a cold run; DIR from an earlier run: warm. It records

* wall seconds, and CPU seconds (user+sys) of the whole process tree: the pytest process's
  waited-for children (``RUSAGE_CHILDREN``), and the sum each process reports itself
  (:mod:`modes_profile`);
* the load average, sampled every 5 s (on a shared machine wall time is inflated; compare the
  CPU seconds and the ratios of back-to-back runs);
* every test's outcome (``--junitxml``) and, per group of tests (a mode's pass, a mode
  category, the eager suite), wall seconds and torch's own compile timers;
* what the run added to the compile cache: C++ builds (shared objects), FX graph cache
  entries, AOTInductor packages.

``report A.json [B.json ...]`` prints each run's table side by side and compares every run's
per-test outcomes with the first's (the same ids passed, xfailed, skipped, failed).

    python benchmarks/bench_modes.py run --label before --tree ../base --compile-cache c0 --out res
    python benchmarks/bench_modes.py run --label after --compile-cache c1 --out res
    python benchmarks/bench_modes.py report res/before.json res/after.json

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODES = ("eager", "script", "trace", "compile", "export", "aoti")
BACKENDS = ("aot_eager", "inductor")
COMMAND = (
    "--backend",
    "cpu",
    "--dtype",
    "all",
    "-n",
    "2",
    *(a for m in MODES for a in ("--mode", m)),
    *(a for b in BACKENDS for a in ("--compile-backend", b)),
)
PHASES = (
    "dynamo trace",
    "aot_autograd (all)",
    "inductor lowering",
    "inductor codegen",
    "C++ compile",
    "load compiled module",
    "aoti compile",
)


def outcomes(junit: Path) -> dict[str, str]:
    """Test id -> passed, failed, error, skipped or xfailed (from pytest's junit XML)."""
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        tid = f"{case.get('classname')}::{case.get('name')}"
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed" if child.tag == "failure" else "error"
            elif child.tag == "skipped":
                status = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        out[tid] = status
    return out


def sample_load(stop: threading.Event, samples: list[float]) -> None:
    while not stop.wait(5.0):
        samples.append(os.getloadavg()[0])


def adopt_orphans() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux): xdist's workers and the
    compile workers are not all waited for by their parents, and only a waited-for process's CPU
    time reaches ``RUSAGE_CHILDREN``."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap_orphans(seconds: float = 60.0) -> None:
    """Wait for the descendants left to this process (their CPU time then counts)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.2)


def merged_profiles(folder: Path) -> dict[str, Any]:
    """The processes' profiles (:mod:`modes_profile`) summed: per group, CPU, counters."""
    groups: dict[str, dict[str, float]] = {}
    counters: dict[str, float] = {}
    workers = []
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text())
        workers.append(
            {k: rec[k] for k in ("worker", "startup", "collection", "batches")}
            | {"wall": sum(g["wall"] for g in rec["groups"].values()), "cpu": rec["cpu"]}
        )
        for name, g in rec["groups"].items():
            mine = groups.setdefault(name, {})
            for k, v in g.items():
                mine[k] = mine.get(k, 0.0) + v
        for family, values in rec["counters"].items():
            for k, v in values.items():
                counters[f"{family}.{k}"] = counters.get(f"{family}.{k}", 0) + v
    return {"groups": groups, "counters": counters, "workers": workers}


def cache_files(cache: Path) -> dict[str, int]:
    """What the compile cache holds: C++ builds (shared objects: one per kernel or package built),
    FX graph cache entries, AOTInductor packages."""
    files = [f for f in cache.rglob("*") if f.is_file()] if cache.is_dir() else []
    return {
        "C++ builds (.so)": sum(1 for f in files if f.suffix == ".so"),
        "FX graph cache entries": sum(1 for f in files if "fxgraph" in f.parts),
        "AOTInductor packages": sum(1 for f in files if f.suffix == ".pt2"),
    }


def run(ns: argparse.Namespace) -> int:
    tree = Path(ns.tree).resolve()
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(ns.compile_cache).resolve()
    warm = cache.is_dir() and any(cache.iterdir())
    held = cache_files(cache)
    junit, profile = out / f"{ns.label}.xml", out / f"{ns.label}-profile"
    if profile.exists() and any(profile.iterdir()):
        print(f"{profile} is not empty: choose another --label", file=sys.stderr)
        return 2
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), str(ROOT / "benchmarks"), env.get("PYTHONPATH", "")])
    env["BENCH_MODES_PROFILE"] = str(profile.resolve())
    bundle = out / f"{ns.label}-bundle"
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "-p"]
    cmd += ["modes_profile", *COMMAND, "--compile-cache", str(cache), f"--junitxml={junit.resolve()}"]
    if ns.certify:
        cmd += ["--certify", str(bundle.resolve())]
    cmd += ns.pytest_args
    stop, loads = threading.Event(), [os.getloadavg()[0]]
    sampler = threading.Thread(target=sample_load, args=(stop, loads), daemon=True)
    adopted = adopt_orphans()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    sampler.start()
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    stop.set()
    reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    (out / f"{ns.label}.log").write_text(proc.stdout + proc.stderr)
    tail = [ln for ln in proc.stdout.strip().splitlines() if ln.strip()][-1:]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True)
    record = {
        "label": ns.label,
        "commit": commit.stdout.strip(),
        "cache": "warm" if warm else "cold",
        "exit": proc.returncode,
        "summary": tail[0] if tail else "",
        "wall": wall,
        "cpu_tree_complete": adopted,
        "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "load": {"mean": sum(loads) / len(loads), "min": min(loads), "max": max(loads)},
        "cores": os.cpu_count(),
        "cache_added": {k: v - held[k] for k, v in cache_files(cache).items()},
        "outcomes": outcomes(junit) if junit.exists() else {},
        "profile": merged_profiles(profile) if profile.exists() else {},
    }
    (out / f"{ns.label}.json").write_text(json.dumps(record, indent=1))
    print(
        f"{ns.label}: {record['cache']}, {wall:.0f} s wall, {record['cpu']:.0f} s CPU, "
        f"load {record['load']['mean']:.1f}, exit {proc.returncode}: {record['summary']}"
    )
    return 0


def worker_cpu(rec: dict[str, Any]) -> float:
    return sum(sum(w["cpu"].values()) for w in rec["profile"]["workers"] if w["worker"] != "controller")


def counts(rec: dict[str, Any]) -> str:
    tally: dict[str, int] = {}
    for status in rec["outcomes"].values():
        tally[status] = tally.get(status, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(tally.items()))


def compare(base: dict[str, Any], other: dict[str, Any]) -> str:
    a, b = base["outcomes"], other["outcomes"]
    missing, extra = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    changed = sorted(t for t in set(a) & set(b) if a[t] != b[t])
    if not (missing or extra or changed):
        return f"{other['label']} vs {base['label']}: identical outcomes ({len(a)} tests)"
    lines = [
        f"{other['label']} vs {base['label']}: {len(missing)} missing, {len(extra)} new, "
        f"{len(changed)} changed"
    ]
    lines += [f"  missing {t} ({a[t]})" for t in missing[:20]]
    lines += [f"  new {t} ({b[t]})" for t in extra[:20]]
    lines += [f"  {t}: {a[t]} -> {b[t]}" for t in changed[:40]]
    return "\n".join(lines)


def report(ns: argparse.Namespace) -> int:
    recs = [json.loads(Path(p).read_text()) for p in ns.results]
    width = 14
    head = "".join(f"{r['label'][:width]:>{width}}" for r in recs)
    print(f"{'':34}{head}")

    def row(name: str, values: list[str]) -> None:
        print(f"{name:34}" + "".join(f"{v:>{width}}" for v in values))

    row("commit", [r["commit"] for r in recs])
    row("cache", [r["cache"] for r in recs])
    row("wall s", [f"{r['wall']:.0f}" for r in recs])
    row("CPU s (process tree)", [f"{r['cpu']:.0f}" for r in recs])
    row("CPU s (xdist workers)", [f"{worker_cpu(r):.0f}" for r in recs])
    row("load average (mean)", [f"{r['load']['mean']:.1f}" for r in recs])
    row("load average (min-max)", [f"{r['load']['min']:.0f}-{r['load']['max']:.0f}" for r in recs])
    row(
        "startup+collection s (per proc)",
        ["/".join(f"{w['startup'] + w['collection']:.0f}" for w in r["profile"]["workers"]) for r in recs],
    )
    row(
        "graphs compiled by batches",
        [str(int(sum(w["batches"].get("graphs", 0) for w in r["profile"]["workers"]))) for r in recs],
    )
    for key in (
        "stats.unique_graphs",
        "inductor.fxgraph_cache_hit",
        "inductor.fxgraph_cache_miss",
        "aot_autograd.autograd_cache_bypass",
        "aot_autograd.autograd_cache_hit",
    ):
        row(key, [str(int(r["profile"]["counters"].get(key, 0))) for r in recs])
    for key in ("C++ builds (.so)", "FX graph cache entries", "AOTInductor packages"):
        row(f"added to the cache: {key}", [str(r.get("cache_added", {}).get(key, "-")) for r in recs])
    names = sorted({g for r in recs for g in r["profile"]["groups"]})
    print("\nper group: tests, test wall s summed over workers (and of it, torch's compile timers)")
    for name in names:
        gs = [r["profile"]["groups"].get(name, {}) for r in recs]
        row(f"{name}", [f"{int(g.get('tests', 0))}: {g.get('wall', 0):.0f}" for g in gs])
        for phase in PHASES:
            if any(g.get(phase, 0) >= 1 for g in gs):
                row(f"  {phase}", [f"{g.get(phase, 0):.0f}" for g in gs])
    print()
    for r in recs:
        print(f"{r['label']}: exit {r['exit']}, {counts(r)}")
    for r in recs[1:]:
        print(compare(recs[0], r))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="time the command once")
    r.add_argument("--label", required=True)
    r.add_argument("--tree", default=str(ROOT), help="the source tree to run (default: this checkout)")
    r.add_argument("--compile-cache", default=None, help="empty or missing: cold; from a run: warm")
    r.add_argument("--out", default=None, help="where the results go (default: a new temporary directory)")
    r.add_argument(
        "--no-certify",
        dest="certify",
        action="store_false",
        help="a plain run (default: a certification, --certify into the output directory)",
    )
    r.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    p = sub.add_parser("report", help="print runs side by side and compare their outcomes")
    p.add_argument("results", nargs="+")
    ns = ap.parse_args()
    if ns.what == "run":
        ns.out = ns.out or tempfile.mkdtemp(prefix="bench_modes_")
        ns.compile_cache = ns.compile_cache or tempfile.mkdtemp(prefix="bench_modes_cache_")
        return run(ns)
    return report(ns)


if __name__ == "__main__":
    raise SystemExit(main())

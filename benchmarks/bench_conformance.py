"""Benchmark the conformance suite on CPU.

Prints: tests collected and collection time (``--backend cpu --dtype all``); wall time
of the full cpu run with ``-n 2``; and, from the same run of this script, checks per
second of the suite's per-op tests (serial) against PyTorch's own autocast harness
(``torch.testing._internal.autocast_test_lists``: autocast call + dtype check +
comparison with an explicitly cast control, as ``test/test_autocast.py`` does).

Targets (issue 4): full cpu run under 90 s with -n 2 on 2 cores; collection under 5 s.
Figures are printed, never asserted.

``--log-capture PAIRS``: the installed suite as a user runs it, from an empty directory with no
pytest configuration (``--pyargs conformance --backend cpu --dtype all -m "not programs"``),
serial, PAIRS times with pytest's log capture off (the suite's default) and on (``--log-level
WARNING`` keeps it), alternating; each run's session seconds and user CPU seconds, and whether
the counts agree.

    python benchmarks/bench_conformance.py [--skip-full] [--log-capture PAIRS]
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
import types
import unittest
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|error|errors|deselected|xfailed|xpassed)")
DURATION = re.compile(r" in ([0-9.]+)s")


def pytest_run(*args: str) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", *args]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - t0, p.stdout + p.stderr


def last_line(out: str) -> str:
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def counts(out: str) -> dict[str, int]:
    return {k: int(n) for n, k in SUMMARY.findall(last_line(out))}


def session_seconds(out: str) -> float:
    m = DURATION.search(last_line(out))
    return float(m.group(1)) if m else float("nan")


# ---------------------------------------------------------------------------
# PyTorch's own harness (autocast_test_lists), run the way test_autocast.py runs it
# ---------------------------------------------------------------------------


def _load_torch_lists() -> Any:
    try:
        import expecttest  # noqa: F401
    except ImportError:  # common_utils imports it for its TestCase only
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase  # type: ignore[attr-defined]
        sys.modules["expecttest"] = stub
    # Imported only after the expecttest stub is in place (common_utils needs the module).
    from torch.testing._internal.autocast_test_lists import AutocastCPUTestLists

    return AutocastCPUTestLists("cpu")


def torch_harness_checks() -> list[Callable[[], None]]:
    """One closure per (op, args) entry: autocast call, dtype check, control comparison."""
    lists = _load_torch_lists()
    checks: list[Callable[[], None]] = []

    def cast(v: Any, dtype: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.is_floating_point() and v.dtype != torch.float64:
            return v.to(dtype)
        return v

    def make(module: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out_dtype: Any) -> None:
        fn = getattr(module, name)

        def check() -> None:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = fn(*args, **kwargs)
            got = out if isinstance(out, torch.Tensor) else out[0]
            assert got.dtype == out_dtype, (name, got.dtype, out_dtype)
            control = fn(*[cast(a, out_dtype) for a in args], **kwargs)
            ctl = control if isinstance(control, torch.Tensor) else control[0]
            assert ctl.dtype == got.dtype

        checks.append(check)

    for entry in lists.torch_16:
        name, args, *rest = entry
        make(torch, name, args, rest[0] if rest else {}, torch.bfloat16)
    for entry in lists.nn_16:
        name, args, *rest = entry
        make(torch._C._nn, name, args, rest[0] if rest else {}, torch.bfloat16)
    for entry in lists.torch_fp32:
        name, args, *rest = entry
        make(torch, name, args, rest[0] if rest else {}, torch.float32)
    for entry in lists.nn_fp32:
        name, args, *rest = entry
        make(torch._C._nn, name, args, rest[0] if rest else {}, torch.float32)
    return checks


def harness_rate(seconds: float = 5.0) -> tuple[int, float]:
    warnings.simplefilter("ignore")
    checks = torch_harness_checks()
    ok = []
    for c in checks:  # keep only entries that run on this build
        try:
            c()
            ok.append(c)
        except Exception:
            pass
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for c in ok:
            c()
        n += len(ok)
    return len(ok), n / (time.perf_counter() - t0)


def user_run(where: Path, *args: str) -> tuple[float, float, str]:
    """``pytest --pyargs conformance`` from ``where`` (an empty pytest.ini: nothing of this
    repository's configuration): session seconds, user CPU seconds, the summary line."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(where / "pytest.ini")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    p = subprocess.run([*cmd, "--pyargs", "conformance", *args], cwd=where, capture_output=True, text=True)
    user = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    return session_seconds(p.stdout), user, last_line(p.stdout)


def log_capture(pairs: int) -> None:
    args = ("--backend", "cpu", "--dtype", "all", "-m", "not programs")
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        (where / "pytest.ini").write_text("[pytest]\n")
        for i in range(pairs):
            order = [("off", ()), ("on", ("--log-level", "WARNING"))]
            for name, extra in order if i % 2 == 0 else order[::-1]:
                seconds, user, line = user_run(where, *args, *extra)
                print(f"log capture {name}: {seconds:.1f} s (pytest), {user:.1f} s user CPU -> {line}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-full", action="store_true", help="skip the full -n 2 run")
    ap.add_argument("--log-capture", type=int, default=0, metavar="PAIRS", help="pairs of runs")
    ns = ap.parse_args()
    if ns.log_capture:
        log_capture(ns.log_capture)
        return 0

    wall, out = pytest_run("--backend", "cpu", "--dtype", "all", "--co")
    m = re.search(r"(\d+)(?:/\d+)? tests? collected.* in ([0-9.]+)s", out)
    collected, coll_s = (int(m.group(1)), float(m.group(2))) if m else (0, float("nan"))
    print(f"tests collected (cpu, --dtype all): {collected}")
    print(
        f"collection time: {coll_s:.2f} s (pytest), {wall:.2f} s wall incl. interpreter and torch import"
        f"  [target < 5 s]"
    )

    if not ns.skip_full:
        wall, out = pytest_run("--backend", "cpu", "--dtype", "all", "-n", "2")
        print(f"full cpu run, --dtype all, -n 2: {wall:.1f} s wall  [target < 90 s]  -> {last_line(out)}")

    wall, out = pytest_run("--backend", "cpu", "--dtype", "bfloat16", "-m", "op_policy or numerics")
    c = counts(out)
    ran = c.get("passed", 0) + c.get("failed", 0)
    ours = ran / session_seconds(out)
    entries, theirs = harness_rate()
    print(
        f"suite per-op checks (op_policy+numerics, bf16, serial): {ran} in {session_seconds(out):.1f} s "
        f"= {ours:.1f} checks/s"
    )
    print(f"torch autocast_test_lists harness (bf16, {entries} entries): {theirs:.1f} checks/s")
    print(f"ratio suite/torch harness (checks per second, same run): {ours / theirs:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Two certifications of a small synthetic suite, its bundle and its verifier.

Two certifications of a small synthetic suite (in a temporary directory), one without ``-n``
(one xdist worker) and one with ``-n 2``, side by side. The suite exercises every status: a
crash (``os.abort()``), a hang (ended by pytest-timeout at ``--test-timeout``), a hang that
holds the GIL (ended by faulthandler's watchdog), a matching and a mismatching xfail, an
unexpected pass, a waiver, a not-supported test and a stale entry. Both runs must complete and
agree; the verifier must call the bundle NOT conformant and catch tampering. The pure decisions
are tested in test_certify_decisions.py; the real suite is certified in test_vendor_npu.py and
test_wheel_install.py.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from helpers.certify_helpers import (
    REPO,
    Run,
    certification,
    finish,
    pytest_cmd,
    results,
    start,
    write,
)
from helpers.once import once_per_run
from helpers.warm_runs import pytest_run, verify_run

from conformance.certify import bundle as B
from conformance.certify import verify as verify_module
from conformance.certify.outcomes import SEED, seed_everything
from conformance.cli import SUBCOMMANDS
from conformance.cli import main as cli_main

# ---------------------------------------------------------------------------
# A certification of a synthetic suite
# ---------------------------------------------------------------------------

SUITE = """
import ctypes, os, time
import pytest

@pytest.mark.context
def test_context_ok(): pass

@pytest.mark.op_policy
@pytest.mark.parametrize("op", ["a", "b"])
def test_policy(op):
    if op == "b":
        raise RuntimeError("kernel b missing on this device")

@pytest.mark.op_policy
def test_wrong_exc(): raise ValueError("something else")

@pytest.mark.op_policy
def test_xpass(): pass

@pytest.mark.op_policy
def test_refused(): pytest.skip("not applicable on this host: the kernel refuses these inputs natively")

@pytest.mark.numerics
def test_waived(): assert False, "off by 2 ulp"

@pytest.mark.numerics
def test_not_supported(): os.abort()  # declared not-supported: never run

@pytest.mark.numerics
def test_crash(): os.abort()

@pytest.mark.numerics
def test_hang(): time.sleep(600)

if os.environ.get("SYN_HANG_HOLDING_GIL"):  # in the parallel run only: it costs a worker and 7 s
    @pytest.mark.numerics
    def test_hang_holding_gil(): ctypes.PyDLL(None).sleep(600)  # no Python thread runs meanwhile

@pytest.mark.numerics
def test_after_the_crash(): pass
"""

EXPECTATIONS = """kind: expectations
expectations:
  - {match: "test_syn.py::test_policy[b]", status: xfail, reason: r,
     error: {type: RuntimeError, message: "kernel b missing"}}
  - {match: "test_syn.py::test_wrong_exc", status: xfail, reason: r, error: {type: RuntimeError, message: x}}
  - {match: "test_syn.py::test_xpass", status: xfail, reason: r, error: {type: RuntimeError, message: x}}
  - {match: "test_syn.py::test_waived", status: waiver, reason: r, issue: "https://e.com/1", devices: [cpu]}
  - {match: "test_syn.py::test_not_supported", status: not-supported, reason: r}
  - {match: "test_syn.py::test_gone*", status: skip, reason: r}
"""

EXPECTED = {
    "test_syn.py::test_context_ok": "pass",
    "test_syn.py::test_policy[a]": "pass",
    "test_syn.py::test_policy[b]": "xfail",
    "test_syn.py::test_wrong_exc": "fail",
    "test_syn.py::test_xpass": "unexpected-pass",
    "test_syn.py::test_refused": "skip",
    "test_syn.py::test_waived": "waived",
    "test_syn.py::test_not_supported": "not-supported",
    "test_syn.py::test_crash": "crash",
    "test_syn.py::test_hang": "timeout",
    "test_syn.py::test_after_the_crash": "pass",
}
TIMEOUT_S = "5"
# The same certification without -n (one worker) and with two workers.
GIL_HANG = "test_syn.py::test_hang_holding_gil"
RUNS: dict[str, tuple[str, tuple[str, ...], dict[str, str]]] = {
    "serial": ("out", (), {}),
    "parallel": ("out-n2", ("-n", "2"), {"SYN_HANG_HOLDING_GIL": "1"}),
}


def synthetic(tmp: Path) -> Path:
    d = tmp / "suite"
    d.mkdir()
    write(d / "test_syn.py", SUITE)
    write(d / "exp.yaml", EXPECTATIONS)
    return d


def certify_cmd(out: str, *extra: str) -> list[str]:
    return pytest_cmd("--backend", "cpu", "--expectations", "exp.yaml", "--certify", out, *extra, ".")


def certify_both(tmp: Path) -> dict[str, Run]:
    d = synthetic(tmp)
    procs = {
        name: start(certify_cmd(out, "--test-timeout", TIMEOUT_S, *extra), d, env)
        for name, (out, extra, env) in RUNS.items()
    }
    return {name: finish(proc, d) for name, proc in procs.items()}


@pytest.fixture(scope="module")
def syn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Run]]:
    """Certified once per test run, whichever xdist worker asks first (helpers/once.py)."""
    root, runs = once_per_run(tmp_path_factory, "certify", certify_both)
    return root / "suite", runs


def run_results(syn: tuple[Path, dict[str, Run]], name: str) -> dict[str, dict[str, Any]]:
    """The results of one of the two runs; its reproduction when it wrote no bundle."""
    d, runs = syn
    out = d / RUNS[name][0]
    assert (out / B.RESULTS).is_file(), runs[name].repro()
    return results(out)


def test_every_status_is_recorded(syn: tuple[Path, dict[str, Run]]) -> None:
    d, runs = syn
    cert = runs["serial"]
    rs = run_results(syn, "serial")
    got = {t: r["status"] for t, r in rs.items()}
    assert got == EXPECTED, cert.repro()
    note = rs["test_syn.py::test_refused"]["note"]
    assert "not applicable on this host: the kernel refuses" in note, "a suite skip keeps its reason"
    assert cert.rc == 1, cert.repro()
    meta = certification(d / "out")
    assert meta["workers"] == 3, "one worker, then one after the crash and one after the hang"
    assert meta["stale_expectations"] == ["exp.yaml:9: skip 'test_syn.py::test_gone*'"], meta
    assert not meta["verdict"]["conformant"]


def test_parallel_run_gives_the_serial_statuses(syn: tuple[Path, dict[str, Run]]) -> None:
    d, runs = syn
    serial, parallel = ({t: r["status"] for t, r in run_results(syn, name).items()} for name in RUNS)
    assert parallel.pop(GIL_HANG) == "timeout", runs["parallel"].repro()
    assert parallel == serial == EXPECTED, runs["parallel"].repro()
    assert runs["parallel"].rc == runs["serial"].rc == 1, runs["parallel"].repro()
    assert certification(d / "out-n2")["workers"] == 5, "two workers, and one after each lost test"


@pytest.mark.parametrize("name", RUNS)
def test_lost_tests_say_how_they_were_lost(syn: tuple[Path, dict[str, Run]], name: str) -> None:
    runs = syn[1]
    rs = run_results(syn, name)
    crash, hang = (rs[f"test_syn.py::{t}"] for t in ("test_crash", "test_hang"))
    assert "Fatal Python error: Aborted" in crash["note"] and "in test_crash" in crash["detail"], (
        crash,
        runs[name].repro(),
    )
    assert "pytest-timeout ended" in hang["note"] and "in test_hang" in hang["detail"], (
        hang,
        runs[name].repro(),
    )
    assert float(hang["duration"]) > 0.9 * float(TIMEOUT_S), hang  # timed from the start report: a bit short
    if RUNS[name][2]:  # the run with the GIL hang: faulthandler's watchdog ends it, pytest-timeout starves
        gil = rs[GIL_HANG]
        assert "holding the GIL" in gil["note"] and "in test_hang_holding_gil" in gil["detail"], (
            gil,
            runs[name].repro(),
        )


def test_bundle_files(syn: tuple[Path, dict[str, Run]]) -> None:
    out = syn[0] / "out"
    for name in (
        B.RESULTS,
        B.RESULTS_LOG,
        B.COLLECTED,
        B.CERTIFICATION,
        B.ENVIRONMENT,
        B.JUNIT,
        B.SUMMARY,
        B.EXPECTATIONS_COPY,
        B.MANIFEST,
    ):
        assert (out / name).is_file(), name
    assert B.manifest_problems(out) == []
    env = json.loads((out / B.ENVIRONMENT).read_text())
    assert env["torch"]["version"] and env["python"] and env["os"]
    cpu = env["host_cpu"]  # two verdicts are comparable only with the CPU each ran on
    assert {"model", "isa_flags", "torch_cpu_capability", "isa_env", "machine", "source"} <= set(cpu), cpu
    assert cpu["torch_cpu_capability"] and not cpu["torch_cpu_capability"].startswith("unavailable"), cpu
    if Path("/proc/cpuinfo").is_file():
        assert cpu["model"] and isinstance(cpu["isa_flags"], list), cpu
    junit = (out / B.JUNIT).read_text()
    assert junit.count("<testcase") == len(EXPECTED) and 'type="crash"' in junit
    summary = (out / B.SUMMARY).read_text()
    assert "## Per category" in summary and "| numerics | 5 |" in summary, summary
    assert "autocast: native" in summary, summary  # which autocast was certified
    meta = json.loads((out / B.CERTIFICATION).read_text())
    assert meta["options"]["implementation"] == "native", meta["options"]
    log_lines = (out / B.RESULTS_LOG).read_text().splitlines()
    assert len(log_lines) == len(EXPECTED), "the append-only log has every test"


def test_verify_says_not_conformant(syn: tuple[Path, dict[str, Run]]) -> None:
    d = syn[0]
    v = verify_run(d / "out", {})
    assert v.rc == 1, v.repro()
    assert "verdict: NOT conformant" in v.out and "1 crash" in v.out and "1 timeout" in v.out, v.out
    assert f"test list regenerated from the spec: {len(EXPECTED)} tests" in v.out, v.out


def test_verify_catches_tampering(syn: tuple[Path, dict[str, Run]], tmp_path: Path) -> None:
    d = syn[0]
    # 1. an edited status: the manifest hash no longer matches
    edited = tmp_path / "edited"
    shutil.copytree(d / "out", edited)
    data = json.loads((edited / B.RESULTS).read_text())
    data["tests"] = [t | {"status": "pass"} for t in data["tests"]]
    (edited / B.RESULTS).write_text(json.dumps(data))
    # 2. a test dropped from results and the stored list, manifest recomputed: regeneration finds it
    dropped = tmp_path / "dropped"
    shutil.copytree(d / "out", dropped)
    keep = lambda tests: [t for t in tests if t["id"] != "test_syn.py::test_crash"]  # noqa: E731
    data = json.loads((dropped / B.RESULTS).read_text())
    data["tests"] = [t | {"status": "pass"} for t in keep(data["tests"])]
    (dropped / B.RESULTS).write_text(json.dumps(data))
    (dropped / B.COLLECTED).write_text(json.dumps(keep(json.loads((dropped / B.COLLECTED).read_text()))))
    B.write_manifest(dropped)
    v1, v2 = verify_run(edited, {}), verify_run(dropped, {})
    assert v1.rc == 1 and "results.json: sha256 does not match" in v1.out, v1.repro()
    assert (
        v2.rc == 1
        and "1 test(s) generated by the spec have no result (e.g. test_syn.py::test_crash)" in v2.out
    ), v2.repro()


def test_autocast_spec_runs_from_the_top_layer() -> None:
    """verify-bundle is certification's: the command's entry is conformance.cli, which calls down."""
    scripts = re.search(r"\[project\.scripts\]\n(.*?)\n\n", (REPO / "pyproject.toml").read_text(), re.S)
    assert scripts and 'autocast-spec = "conformance.cli:main"' in scripts.group(1), scripts
    assert verify_module in SUBCOMMANDS


def test_verify_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["verify-bundle", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert cli_main(["verify-bundle", str(tmp_path)]) == 2
    assert "not a certification bundle" in capsys.readouterr().err


def test_certify_refuses_narrowing_overwrite_and_excusing_the_core(
    syn: tuple[Path, dict[str, Run]], tmp_path: Path
) -> None:
    """Each refused before a test runs (exit 2): forked from a warm process, with absolute paths."""
    d = syn[0]
    expect = ("--backend", "cpu", "--expectations")
    narrowed = pytest_run(
        [*expect, str(d / "exp.yaml"), "--certify", str(tmp_path / "k"), "-k", "policy", str(d)], {}
    )
    assert narrowed.rc == 2 and "refuses options that narrow or stop it: -k 'policy'" in narrowed.out, (
        narrowed.repro()
    )
    again = pytest_run([*expect, str(d / "exp.yaml"), "--certify", str(d / "out"), str(d)], {})
    assert (
        again.rc == 2 and "the directory is not empty" in again.out and "--certify-overwrite" in again.out
    ), again.repro()
    core_yaml = write(
        tmp_path / "core.yaml", EXPECTATIONS + "  - {match: '*context_ok', status: skip, reason: r}\n"
    )
    core = pytest_run([*expect, str(core_yaml), "--certify", str(tmp_path / "c"), str(d)], {})
    assert (
        core.rc == 2
        and "core.yaml:10: skip '*context_ok' matches 1 test(s) of the mandatory core" in core.out
    ), core.repro()


def test_each_certified_test_starts_from_the_fixed_seeds(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPU's generator and an initialized device's are seeded; an accelerator torch knows but has
    not initialized is left alone (torch.manual_seed would queue a call with a formatted stack
    for each, per test)."""
    torch.rand(3)
    seed_everything("cpu")
    got = torch.rand(3)
    torch.manual_seed(SEED)
    assert torch.equal(got, torch.rand(3))

    seeded: list[int] = []
    device = SimpleNamespace(manual_seed_all=seeded.append, is_initialized=lambda: True)
    monkeypatch.setattr(torch, "acme_seeded", device, raising=False)
    seed_everything("acme_seeded")
    assert seeded == [SEED]

    monkeypatch.setattr(traceback, "format_stack", lambda *a, **k: pytest.fail("a lazy seed was queued"))
    for name in ("cuda", "xpu", "mtia"):
        if not getattr(torch, name).is_initialized():
            seed_everything(name)


def test_a_certification_worker_ends_without_finalizing_the_interpreter() -> None:
    """QuickExit (conformance/certify/workers.py): at the end of a certification's worker the
    process exits at once, status 0, its output flushed; atexit handlers (and the interpreter's
    finalization, seconds with torch loaded) do not run. Every certification test above checks
    that its bundle is complete all the same."""
    code = (
        "import atexit; from conformance.certify.workers import QuickExit; "
        "atexit.register(lambda: print('finalized')); print('flushed', end=''); "
        "QuickExit().pytest_unconfigure(); print('went on')"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stdout) == (0, "flushed"), (p.returncode, p.stdout, p.stderr)

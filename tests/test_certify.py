"""Certification machinery: expectations, statuses, isolation, the bundle and its verifier.

Unit tests of the pure decisions, then two certifications of a small synthetic
suite (in a temporary directory), one without ``-n`` (one xdist worker) and one
with ``-n 2``, side by side. The suite exercises every status: a crash
(``os.abort()``), a hang (ended by pytest-timeout at ``--test-timeout``), a hang
that holds the GIL (ended by faulthandler's watchdog), a matching and a
mismatching xfail, an unexpected pass, a waiver, a not-supported test and a
stale entry. Both runs must complete and agree; the verifier must call the
bundle NOT conformant and catch tampering. The real suite is certified in
test_vendor_npu.py and test_wheel_install.py.
"""

from __future__ import annotations

import json
import platform
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers.certify_helpers import REPO, Run, certification, finish, pytest_cmd, results, run, start, verify

from autocast_spec.problems import SpecError
from conformance.certify import bundle as B
from conformance.certify import verify as verify_module
from conformance.certify.expectations import (
    Expectations,
    Failure,
    glob_matches,
    load_expectations,
    mandatory_violations,
    stale_entries,
    status_of,
)
from conformance.certify.host import host_cpu
from conformance.certify.recorder import worker_args
from conformance.certify.verdict import check_ids, results_verdict
from conformance.certify.workers import START_MARK, TIMEOUT_MARK, lost_test
from conformance.cli import SUBCOMMANDS
from conformance.cli import main as cli_main

# ---------------------------------------------------------------------------
# Pure decisions
# ---------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_globs_treat_brackets_literally() -> None:
    tid = "conformance/test_op_policy.py::test_op_policy[npu-float16-fp32-aten::cosh]"
    assert glob_matches("conformance/test_op_policy.py::*[npu-float16-fp32-aten::cosh*", tid)
    assert glob_matches("*aten::cos?]", tid)
    assert not glob_matches("*[npu-float16-fp32-aten::cos]", tid)
    assert not glob_matches("test_op_policy.py::*", tid), "globs match the whole id"


@pytest.mark.parametrize(
    "entry,line,message",
    [
        (
            "  - {match: a, status: maybe, reason: r}",
            3,
            "'maybe' is not one of skip, xfail, not-supported, waiver",
        ),
        (
            "  - {match: a, status: waiver, reason: r, devices: [npu]}",
            3,
            "missing 'issue' (status waiver needs it)",
        ),
        ("  - {match: a, status: xfail, reason: r}", 3, "missing 'error' (status xfail needs it)"),
        ("  - {match: a, status: skip, reason: r, colour: red}", 3, "unknown key 'colour'"),
        ("  - {match: a, status: waiver, reason: r, issue: nope, devices: [x]}", 3, "is not an issue URL"),
        (
            "  - {match: a, status: skip, reason: r, error: {type: E, message: m}}",
            3,
            "'error' is only for status xfail",
        ),
        (
            "  - {match: a, status: xfail, reason: r, error: {type: E, message: '('}}",
            3,
            "not a valid regular expression",
        ),
    ],
)
def test_bad_expectations_name_file_and_line(tmp_path: Path, entry: str, line: int, message: str) -> None:
    f = write(tmp_path / "exp.yaml", f"kind: expectations\nexpectations:\n{entry}\n")
    with pytest.raises(SpecError) as e:
        load_expectations(f)
    first = str(e.value.problems[0])
    assert first.startswith(f"{f}:{line}:") and message in first, first


def test_status_table() -> None:
    exp = load_expectations_text(
        """
  - {match: x, status: xfail, reason: r, error: {type: RuntimeError, message: "no kernel"}}
  - {match: w, status: waiver, reason: r, issue: "https://e.com/1", devices: [npu]}
  - {match: n, status: not-supported, reason: r}
"""
    )
    xf, wv, ns = (exp.for_test(t, "npu") for t in ("x", "w", "n"))
    rt = Failure(("RuntimeError", "builtins.RuntimeError"), "no kernel for mm")
    other = Failure(("ValueError",), "bad")
    assert status_of("failed", xf, rt)[0] == "xfail"
    assert status_of("failed", xf, other)[0] == "fail"
    assert status_of("passed", xf)[0] == "unexpected-pass"
    assert status_of("failed", wv, other)[0] == "waived"
    assert status_of("passed", wv)[0] == "pass"
    assert status_of("passed", ns)[0] == "not-supported"
    assert status_of("skipped", None)[0] == "skip"
    assert status_of("failed", None, other)[0] == "fail"
    assert exp.for_test("w", "cuda") is None, "a waiver covers only its devices"


@pytest.mark.parametrize(
    ("asked", "how"), [(None, "no --dtype: the device's default"), ("all", "--dtype all")]
)
def test_summary_names_the_dtypes_that_ran(asked: str | None, how: str) -> None:
    ran = ["bfloat16"] if asked is None else ["float16", "bfloat16"]
    results = [B.TestResult(f"t{i}", "passed", dtype=d) for i, d in enumerate([*ran, None])]
    meta = {
        "options": {"backend": "cpu", "dtype": asked, "policy_only": False},
        "verdict": {"conformant": True},
    }
    line = next(x for x in B.render_summary(results, meta).splitlines() if x.startswith("- Backend:"))
    names = ", ".join(f"`{d}`" for d in sorted(ran))
    assert f"dtypes {names} ({how})" in line and "None" not in line, line


def test_summary_lists_every_declared_exception_with_its_reason_once() -> None:
    bug = "suite xfail: known bug b (https://example.org/1): the reason"
    results = [B.TestResult(f"t{i}", "xfail", note=bug) for i in range(250)]
    results += [B.TestResult("s", "skip", note="not applicable"), B.TestResult("p", "pass")]
    text = B.render_summary(results, {"options": {}, "verdict": {"conformant": True}})
    assert "## Declared exceptions (251: skip 1, xfail 250)" in text
    assert text.count(bug) == 1 and f"### xfail, 250 tests: {bug}" in text
    assert all(f"- `t{i}`" in text.splitlines() for i in range(250))  # none left out
    assert "### skip, 1 test: not applicable" in text and "- `p`" not in text


def test_a_suite_skip_keeps_its_reason() -> None:
    skipped = Failure(("Skipped",), "not applicable on this host: the kernel refuses these inputs natively")
    assert status_of("skipped", None, skipped) == (
        "skip",
        "skipped by the suite: not applicable on this host: the kernel refuses these inputs natively",
    )
    assert status_of("skipped", None) == ("skip", "skipped by the suite")


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Example CPU
flags\t\t: fpu sse4_2 avx avx2 fma f16c avx512f avx512_bf16 amx_tile amx_bf16 ht

processor\t: 1
model name\t: another
"""


def test_host_cpu_records_model_flags_capability_and_isa_caps(tmp_path: Path) -> None:
    info = write(tmp_path / "cpuinfo", CPUINFO)
    env = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "HOME": "/x"}
    cpu = host_cpu(lambda: "AVX2", info, env)
    assert cpu["model"] == "Intel(R) Xeon(R) Example CPU"
    want = "sse4_2 avx avx2 fma f16c avx512f avx512_bf16 amx_tile amx_bf16"
    assert cpu["isa_flags"] == want.split(), "the relevant flags, in a fixed order; 'ht' and 'fpu' left out"
    assert cpu["torch_cpu_capability"] == "AVX2"
    assert cpu["isa_env"] == {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def test_host_cpu_without_proc_cpuinfo_records_what_is_known(tmp_path: Path) -> None:
    def no_capability() -> str:
        raise AttributeError("get_cpu_capability")

    cpu = host_cpu(no_capability, tmp_path / "absent", {})
    assert cpu["model"] is None and cpu["isa_flags"] is None and "unavailable" in cpu["source"]
    assert cpu["machine"] == platform.machine() and cpu["isa_env"] == {}
    assert cpu["torch_cpu_capability"] == "unavailable (AttributeError)"
    json.dumps(cpu)  # it goes into environment.json


def test_environment_names_the_vendor_release_and_the_device_as_the_suite_sees_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """environment.json: the device is available as the suite decides it (torch_xla registers no
    ``torch.xla`` module to ask), and a vendor spec's release is recorded beside the installed one."""
    from autocast_spec.common import frozen_map
    from autocast_spec.model import VendorRelease
    from conformance.certify.identity import environment

    monkeypatch.setenv("ACME_OFFLINE", "1")
    vendor = VendorRelease("pytest", "0.0.1", "pytest", frozen_map({"ACME_OFFLINE": "1"}))
    env = environment("cpu", vendor)
    assert env["device"]["available"] is True
    assert env["vendor"]["package"] == "pytest" and env["vendor"]["spec_version"] == "0.0.1"
    assert env["vendor"]["installed"] == pytest.__version__
    assert env["vendor"]["environment"] == {"ACME_OFFLINE": "1"}
    assert "vendor" not in environment("cpu")
    json.dumps(env)


def load_expectations_text(entries: str, tmp: Path | None = None) -> Expectations:
    d = Path(tmp or tempfile.mkdtemp())
    return load_expectations(write(d / "exp.yaml", "kind: expectations\nexpectations:" + entries))


def test_mandatory_core_cannot_be_excused_and_stale_entries_are_found() -> None:
    exp = load_expectations_text(
        """
  - {match: "*ctx*", status: skip, reason: r}
  - {match: "*gone*", status: skip, reason: r}
"""
    )
    tests = {"t.py::ctx_nesting": "context", "t.py::mm": "op_policy"}
    probs = mandatory_violations(exp, tests, ["context", "eligibility"], "cpu")
    assert len(probs) == 1 and probs[0].line == 3 and "mandatory core" in probs[0].message, probs
    assert [e.match for e in stale_entries(exp, tests, "cpu")] == ["*gone*"]


def test_worker_args_drop_coordinator_options() -> None:
    args = [
        "--backend",
        "cpu",
        "--certify",
        "out",
        "--test-timeout=5",
        "--certify-overwrite",
        "--junitxml",
        "j.xml",
        "--expectations",
        "e.yaml",
        "--pyargs",
        "conformance",
        "-n",
        "2",
        "-nauto",
        "--dist=load",
        "--max-worker-restart",
        "3",
    ]
    assert worker_args(args) == ["--backend", "cpu", "--expectations", "e.yaml", "--pyargs", "conformance"]


def test_a_lost_test_is_a_timeout_only_when_its_worker_log_says_so(tmp_path: Path) -> None:
    log = tmp_path / "gw3.log"
    t = "test_x.py::test_t"
    log.write_text(f"{START_MARK}{t}\n{TIMEOUT_MARK}{t}: ran past 5 s\n{START_MARK}test_x.py::test_u\n")
    assert lost_test(log, "gw3", t, 5)[0] == "timeout"
    status, detail = lost_test(log, "gw3", "test_x.py::test_u", 5)
    assert status == "crash" and "no fatal-error report" in detail, (
        "an earlier test's timeout is not this one's"
    )
    log.write_text(f"{START_MARK}{t}\nTimeout (0:00:07)!\nThread 0x1 (most recent call first):\n")
    assert lost_test(log, "gw3", t, 5)[0] == "timeout", "faulthandler's watchdog: a hang holding the GIL"
    log.write_text(f"{START_MARK}{t}\nFatal Python error: Segmentation fault\n\nCurrent thread 0x1:\n")
    status, detail = lost_test(log, "gw3", t, 5)
    assert status == "crash" and detail.startswith(
        "worker gw3 died while this test ran (Fatal Python error: Segm"
    )


def test_ids_must_be_complete_and_unique() -> None:
    rs = [B.TestResult("a", "pass"), B.TestResult("a", "pass"), B.TestResult("c", "pass")]
    probs = check_ids(rs, ["a", "b", "c"], ["a", "b", "c", "d"])
    text = "\n".join(probs)
    assert "appear more than once" in text and "collected at certification have no result" in text
    assert "generated by the spec have no result (e.g. b)" in text


def test_mandatory_core_accepts_only_torchs_own_known_bugs() -> None:
    """A mandatory-core test the suite reports xfail as a known bug of torch (spec/rules.yaml)
    does not refuse the backend: no backend can fix torch. A vendor file's known bug does,
    and so does any other status."""

    def core(note: str, status: str = "xfail") -> B.TestResult:
        return B.TestResult("conformance/test_context.py::t", status, category="context", note=note)

    torch_bug = core("suite xfail: known bug torch-bug (https://x): why")
    vendor_bug = core("suite xfail: known bug vendor-bug (none): why")
    assert results_verdict([torch_bug], ["context"], ["torch-bug"]).conformant
    assert not results_verdict([vendor_bug], ["context"], ["torch-bug"]).conformant
    assert not results_verdict([torch_bug], ["context"]).conformant
    assert not results_verdict([core("", "skip")], ["context"], ["torch-bug"]).conformant


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


def certify_synthetic(d: Path, out: str, *extra: str) -> Run:
    return run(certify_cmd(out, *extra), d)


@pytest.fixture(scope="module")
def syn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Run]]:
    d = synthetic(tmp_path_factory.mktemp("certify"))
    procs = {
        name: start(certify_cmd(out, "--test-timeout", TIMEOUT_S, *extra), d, env)
        for name, (out, extra, env) in RUNS.items()
    }
    return d, {name: finish(proc, d) for name, proc in procs.items()}


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
    v = verify(d / "out", d)
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
    v1, v2 = verify(edited, d), verify(dropped, d)
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
    d = syn[0]
    narrowed = certify_synthetic(d, str(tmp_path / "k"), "-k", "policy")
    assert narrowed.rc == 2 and "refuses options that narrow or stop it: -k 'policy'" in narrowed.out, (
        narrowed.repro()
    )
    again = certify_synthetic(d, "out")
    assert (
        again.rc == 2 and "the directory is not empty" in again.out and "--certify-overwrite" in again.out
    ), again.repro()
    write(d / "core.yaml", EXPECTATIONS + "  - {match: '*context_ok', status: skip, reason: r}\n")
    core = run(
        pytest_cmd("--backend", "cpu", "--expectations", "core.yaml", "--certify", str(tmp_path / "c"), "."),
        d,
    )
    assert (
        core.rc == 2
        and "core.yaml:10: skip '*context_ok' matches 1 test(s) of the mandatory core" in core.out
    ), core.repro()

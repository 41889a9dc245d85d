"""Certification's pure decisions: expectations files, statuses, the summary, the host record,
the environment, the mandatory core, worker arguments and lost tests.

The certifications that run a suite are in test_certify.py (a synthetic suite),
test_vendor_npu.py and test_wheel_install.py.
"""

from __future__ import annotations

import json
import platform
import tempfile
from pathlib import Path

import pytest
from helpers.certify_helpers import write

from autocast_spec.problems import SpecError
from conformance.certify import bundle as B
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

# ---------------------------------------------------------------------------
# Pure decisions
# ---------------------------------------------------------------------------


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
    results = [B.TestResult(f"t{i}", "xfail", note=bug) for i in range(B.LISTED_IDS)]
    results += [B.TestResult("s", "skip", note="not applicable"), B.TestResult("p", "pass")]
    text = B.render_summary(results, {"options": {}, "verdict": {"conformant": True}})
    n = B.LISTED_IDS
    assert f"## Declared exceptions ({n + 1}: skip 1, xfail {n})" in text
    assert text.count(bug) == 1 and f"### xfail, {n} tests: {bug}" in text
    assert all(f"- `t{i}`" in text.splitlines() for i in range(n))  # none left out
    assert "### skip, 1 test: not applicable" in text and "- `s`" in text and "- `p`" not in text


def test_a_big_group_of_one_reason_is_counted_per_test_function() -> None:
    ids = [f"conformance/test_cache.py::test_a[{i}]" for i in range(50)] + [
        "conformance/test_x.py::test_b[0]"
    ]
    results = [B.TestResult(i, "skip", note="policy-only") for i in ids]
    lines = B.declared_sections(results)
    assert "- `conformance/test_cache.py::test_a[...]`: 50" in lines
    assert "- `conformance/test_x.py::test_b[...]`: 1" in lines and len(lines) < 10


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
        "--compile-cache",
        "cache",
        "--compile-cache=warm",
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

"""benchmarks/gpu_certify.sh, the prepared run of a lent GPU: its options, its verdict, and a
reduced dry run (slow) that takes a step through the cut and another through a complete,
verified bundle, so that the script does not rot between the sessions that have a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from conformance.certify import bundle as B
from conformance.certify.verdict import check_ids, results_verdict

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_certify.sh"
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_certify_report as report  # noqa: E402


def run_script(*args: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env["PYTHON"] = sys.executable
    return subprocess.run(
        ["bash", str(SCRIPT), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus"], "unknown option '--bogus'"),
        (["--steps", "eager,fast"], "unknown step 'fast'"),
        (["--budget", "eager=0"], "positive whole number"),
        (["--budget", "warmup=10"], "STEP one of: eager inductor export aoti"),
        (["-n", "two"], "positive number of workers"),
        (["--out"], "--out needs a value"),
        (["--fetch-wheels", "--dry-run"], "give it alone"),
        ([], "no output directory: give --out DIR"),
    ],
)
def test_a_bad_option_exits_2_saying_what_to_do(args: list[str], message: str) -> None:
    p = run_script(*args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr
    assert "Traceback" not in p.stderr


def test_an_output_directory_in_use_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep")
    p = run_script("--dry-run", "--out", str(tmp_path))
    assert p.returncode == 2
    assert "not empty" in p.stderr
    assert [f.name for f in tmp_path.iterdir()] == ["mine.txt"]
    assert (tmp_path / "mine.txt").read_text() == "keep"


def test_wheels_one_version_each_for_the_gpu_machines_python(tmp_path: Path) -> None:
    ok = "referencing-0.37.0-py3-none-any.whl"
    (tmp_path / ok).touch()
    (tmp_path / "rpds_py-1.0-cp312-cp312-manylinux_2_17_x86_64.whl").touch()
    report.wheels(tmp_path)
    (tmp_path / "referencing-0.36.2-py3-none-any.whl").touch()
    with pytest.raises(SystemExit) as two:
        report.wheels(tmp_path)
    assert two.value.code == 2
    (tmp_path / "referencing-0.36.2-py3-none-any.whl").unlink()
    (tmp_path / "rpds_py-1.0-cp312-cp312-manylinux_2_17_x86_64.whl").rename(
        tmp_path / "rpds_py-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    )
    with pytest.raises(SystemExit):
        report.wheels(tmp_path)


META = {"mandatory_core": ["context", "threads"]}
NO_GPU = "skipped by the suite: autocast('cuda') does not enable on this machine (CUDA is not available)"


def test_what_explains_a_verify_bundle_reason() -> None:
    """The reasons as conformance/certify/verdict.py words them (verify-bundle prints them)."""
    skipped = B.TestResult("conformance/test_context.py::t[cuda-float16]", "skip", "context", note=NO_GPU)
    core_skips = [asdict(skipped)]
    (core,) = results_verdict([skipped], META["mandatory_core"]).reasons
    cut_reasons = [*check_ids([], ["t1", "t2"], ["t1", "t2"]), *results_verdict([], ["context"]).reasons]
    cut_reasons.append("1325 mandatory-core test(s) missing (e.g. t1)")  # as conformance/certify/verify.py
    for reason in cut_reasons:
        assert report.explained(reason, "cut", [], META, dry_run=False) == "the cut", reason
        assert report.explained(reason, "complete", [], META, dry_run=True) == "", reason
    assert "policy-only" in report.explained(core, "complete", core_skips, META, dry_run=True)
    assert report.explained(core, "complete", core_skips, META, dry_run=False) == ""  # on a GPU: a finding
    other = [*core_skips, {"category": "threads", "status": "skip", "note": "some other reason"}]
    assert report.explained(core, "complete", other, META, dry_run=True) == ""
    hashes = "results.json: sha256 does not match manifest.json (the file was changed)"
    assert report.explained(hashes, "cut", core_skips, META, dry_run=True) == ""


def step(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "step": "eager",
        "status": "complete",
        "why": "pytest exit 0",
        "archive": "eager.tar.gz",
        "options_accepted": True,
        "bundle_written": True,
        "verify": {"rc": 0, "verdict": "verdict: conformant", "unexplained": []},
    }
    return {**base, **changes}


def test_the_verdict_on_a_gpu_and_in_a_dry_run() -> None:
    assert report.problems([step()], dry_run=False) == []
    not_conformant = step(verify={"rc": 1, "verdict": "verdict: NOT conformant", "unexplained": ["x"]})
    assert report.problems([not_conformant], dry_run=False)
    assert report.problems([step(status="cut", why="ran past its limit")], dry_run=False)
    assert report.problems([step(archive=None)], dry_run=False)
    # a dry run: reasons the cut and policy-only explain are fine, others are not
    explained_only = step(status="cut", verify={"rc": 1, "verdict": "v", "unexplained": []})
    assert report.problems([explained_only], dry_run=True) == []
    unexplained = step(verify={"rc": 1, "verdict": "v", "unexplained": ["hash mismatch"]})
    assert report.problems([unexplained], dry_run=True) == ["eager: verify-bundle: hash mismatch"]
    assert report.problems([step(verify={"rc": 2, "verdict": "v", "unexplained": []})], dry_run=True)
    # cut before its bundle: fine once pytest accepted its options, if another bundle verified
    no_bundle = {"step": "aoti", "bundle_written": False, "verify": {"rc": None, "unexplained": []}}
    assert report.problems([step(), step(status="cut", **no_bundle)], dry_run=True) == []
    starting = step(status="cut", options_accepted=False, why="cut while starting", **no_bundle)
    assert report.problems([step(), starting], dry_run=True) == ["aoti: cut while starting"]
    (only,) = report.problems([step(status="cut", **no_bundle)], dry_run=True)
    assert only.startswith("no step wrote a bundle that verify-bundle read")


def test_what_comes_back_from_a_lent_machine(tmp_path: Path) -> None:
    for i in range(8):
        (tmp_path / f"f{i}.txt").write_text("x")
    assert report.sendable(tmp_path) == []
    (tmp_path / "f8.txt").write_text("x")
    assert report.sendable(tmp_path) == [f"9 files in {tmp_path}, more than the 8 that come back"]
    (tmp_path / "f8.txt").unlink()
    with (tmp_path / "f0.txt").open("wb") as f:
        f.truncate(report.MAX_FILE_BYTES + 1)
    (big,) = report.sendable(tmp_path)
    assert big == f"f0.txt: {report.MAX_FILE_BYTES + 1} bytes, over the 16777216 that come back"


@pytest.mark.slow
def test_a_reduced_dry_run_cuts_one_step_and_verifies_the_next(tmp_path: Path) -> None:
    """eager gets a share (24 s) that no certification fits in (cut at its limit, whatever the load);
    export gets time enough to complete, and its bundle must verify with no reason but the
    policy-only one. A few minutes on 2 shared cores.

    eager's run is given its share plus the dry run's 10 s of setup, less the probe's seconds and
    the 12 s of wrap-up: about 20 s (a step given under 5 s is not run, so 24 leaves the probe
    17 s on a busy host). The whole share is spent (the run is cut) while a policy-only eager
    certification takes about a minute, so a larger share only costs CPU."""
    out = tmp_path / "out"
    p = run_script(
        "--dry-run", "--steps", "eager,export", "--budget", "eager=24", "--budget", "export=900",
        "--out", str(out), timeout=1200,
    )  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    eager, export = summary["steps"]
    assert p.returncode == (1 if summary["problems"] else 0), p.stdout + p.stderr
    assert all(x.startswith("eager: ") for x in summary["problems"]), summary["problems"]

    assert eager["status"] == "cut", eager
    assert eager["ended_at_s"] <= eager["deadline_s"] + 1, eager  # it did not take export's share

    assert export["status"] == "complete", export
    assert export["results"] == export["tests"] > 5000
    assert not any(export["counts"][s] for s in ("fail", "crash", "timeout", "unexpected-pass"))
    (reason,) = export["verify"]["reasons"]
    assert export["verify"]["rc"] == 1 and reason["explained_by"].startswith("policy-only"), reason

    names = {f.name for f in out.iterdir()}
    assert names == {"summary.md", "summary.json", "gpu_certify.log", "eager.tar.gz", "export.tar.gz"}
    assert report.sendable(out) == []
    with tarfile.open(out / "export.tar.gz") as t:
        members = set(t.getnames())
    assert {"export/bundle/manifest.json", "export/certify.log", "export/verify.log"} <= members
    assert "| export | complete | " in (out / "summary.md").read_text()

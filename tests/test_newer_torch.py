"""A torch newer than the spec: the suite runs against the nearest covered release.

Simulated by reporting the installed torch as 2.99.0 (``-p helpers.simulate_torch_version``):
the spec covers up to 2.15, so the suite reads the 2.15 spec, says so in one header
line, skips what the 2.15 spec lists but this torch lacks as "not in this torch", and
fails the registration test, with the command to probe, for the Autocast kernels this
torch has that the 2.15 spec does not list. A spec probed from the simulated torch
then runs with ``--spec`` as it comes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.suite_runs import ROOT, outcomes, run_suite, skip_reasons, summary, with_tests_on_path

from autocast_spec.versions import nearest_covered_version
from reference_impl.engine.torch_registry import autocast_registrations, op_exists
from reference_impl.spectools.installed_spec import load_installed_spec

SIMULATED = "2.99.0"
ENV = with_tests_on_path({"SIMULATED_TORCH_VERSION": SIMULATED})


@pytest.fixture(scope="module")
def nearest() -> str:
    ranges = {ds.torch_versions for ds in load_installed_spec().devices.values()}
    near = nearest_covered_version(ranges, SIMULATED)
    assert near is not None
    return near


def test_runs_against_the_nearest_covered_spec(tmp_path: Path, nearest: str) -> None:
    cpu = load_installed_spec(torch_version=nearest, check_registry=False).devices["cpu"]
    absent = sorted(op for op in cpu.ops if not op_exists(op))
    unknown = sorted(autocast_registrations(cpu.dispatch_key) - set(cpu.ops))
    if not (absent or unknown):
        gap = f"torch {torch.__version__} has the {nearest} spec's Autocast kernels"
        pytest.skip(f"{gap}: no version gap to simulate (run on an older torch)")
    assert absent and unknown, "the simulation needs ops on both sides of the version gap"
    xml = tmp_path / "run.xml"
    p = run_suite(
        "--backend",
        "cpu",
        "-p",
        "helpers.simulate_torch_version",
        "-m",
        "registration",
        f"--junitxml={xml}",
        env_extra=ENV,
    )
    header = [ln for ln in p.stdout.splitlines() if "does not cover torch" in ln]
    assert len(header) == 1 and f"nearest covered version, {nearest}" in header[0], summary(p)
    assert p.returncode == 1, summary(p)  # the unknown registrations fail, nothing crashes
    result, reasons = outcomes(xml), skip_reasons(xml)
    for op in absent:
        [tid] = [t for t in result if t.endswith(f"-{op}]")]
        assert result[tid] == "skipped" and "not in this torch" in reasons[tid], (op, result[tid])
    failed = sorted(t for t, v in result.items() if v == "failure")
    assert failed == sorted(
        f"conformance.test_registration::test_registration[cpu-unlisted-{op}]" for op in unknown
    )
    assert "autocast-spec probe --device cpu -o cpu.yaml" in p.stdout, summary(p)
    assert all(v in ("passed", "skipped", "failure") for v in result.values())


def test_a_probed_spec_runs_as_it_comes(tmp_path: Path) -> None:
    probed = tmp_path / "cpu.yaml"
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import helpers.simulate_torch_version, sys; from conformance.cli import main; "
            f"sys.exit(main(['probe', '--device', 'cpu', '-o', {str(probed)!r}]))",
        ],
        cwd=ROOT,
        env={**__import__("os").environ, **ENV},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert probe.returncode == 0, probe.stderr
    assert 'torch: ">=2.99,<2.100"' in probed.read_text()
    xml = tmp_path / "run.xml"
    p = run_suite(
        "--backend",
        "cpu",
        "--spec",
        str(probed),
        "-p",
        "helpers.simulate_torch_version",
        "-m",
        "registration or op_policy",
        f"--junitxml={xml}",
        env_extra=ENV,
    )
    assert "does not cover torch" not in p.stdout, summary(p)
    result = outcomes(xml)
    assert p.returncode == 0 and "passed" in result.values(), summary(p)

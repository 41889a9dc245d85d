"""A vendor backend whose native code ends the process: the run survives, and says why.

The simulated npu of tests/vendor_npu stands in for a vendor's package (it is loaded as the
module a ``vendor:`` block names, as the suite loads torch_npu). It proves what the suite does
with a process that ends; it does not prove anything about a real vendor's kernels:

- a plain run of a backend whose device file names a vendor package runs in one xdist worker:
  the kernel that aborts costs its test, reported ``[crash]`` with the message the process
  wrote to file descriptor 2 (as ``std::terminate`` does) and faulthandler's report, and every
  other test runs (``-n 0``, the old in-process way, dies with it);
- a policy-only run never calls the vendor's own autograd kernels (torch_npu registers 131 at
  AutogradPrivateUse1, ``_thnn_fused_gru_cell`` among them; FakeTensorMode acts below that
  key), so a kernel there that ends the process is never reached.

The simulated backend reads its ``NPU_SIM_*`` variables when the run imports it (in the run's
process, never in the warm one), so each run forks from the warm process
(helpers/suite_runs.py: torch and the suite imported once); a run's worker is a fresh process.
The in-process runs say ``--numprocesses 0`` (``-n 0``): no worker.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.suite_runs import ROOT, TESTS, run_suite, summary

pytestmark = pytest.mark.slow

VENDOR = "vendor: {package: npu-sim, version: '1.0', module: npu_backend}\n"


def _vendor_spec(tmp_path: Path) -> Path:
    """tests/vendor_npu/npu.yaml, naming the simulated backend as its vendor package."""
    f = tmp_path / "npu.yaml"
    f.write_text((TESTS / "vendor_npu" / "npu.yaml").read_text(encoding="utf-8") + VENDOR, encoding="utf-8")
    return f


def _run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    spec = _vendor_spec(tmp_path)
    paths = f"{ROOT}:{TESTS / 'vendor_npu'}"
    return run_suite(
        "--backend", "npu", "--policy-only", "--spec", str(spec), *args,
        env_extra={"PYTHONPATH": paths}, plugin_env=env,
    )  # fmt: skip


IN_PROCESS = ("--numprocesses", "0")  # -n 0: no worker, the run's own process runs the tests


def test_a_plain_run_survives_an_aborting_kernel_and_keeps_its_message(tmp_path: Path) -> None:
    marker = tmp_path / "aborted-once"
    env = {"NPU_SIM_ABORT": "aten::mm", "NPU_SIM_ABORT_MARKER": str(marker)}
    p = _run(tmp_path, "-k", "test_op_policy and aten::mm-", "-rf", **env)
    assert marker.exists(), summary(p)  # the kernel did end a process
    assert p.returncode == 1 and "1 failed" in p.stdout and " passed" in p.stdout, summary(p)
    crash = next(line for line in p.stdout.splitlines() if "[crash]" in line)
    assert "Fatal Python error: Aborted" in crash and "what():  simulated: no device" in crash, crash

    marker.unlink()
    inproc = _run(tmp_path, "-k", "test_op_policy and aten::mm-", *IN_PROCESS, **env)
    assert inproc.returncode not in (0, 1) and " passed" not in inproc.stdout, summary(inproc)


def test_a_policy_only_run_never_calls_the_vendors_autograd_kernels(tmp_path: Path) -> None:
    """In process (no worker to lose): a kernel that ended the process would end the run."""
    env = {"NPU_SIM_AUTOGRAD_ABORT": "aten::_thnn_fused_gru_cell"}
    op = ("--op", "aten::_thnn_fused_gru_cell")
    p = _run(tmp_path, "--dtype", "all", *op, "-m", "eligibility", *IN_PROCESS, **env)
    assert p.returncode == 0 and "[crash]" not in p.stdout and " passed" in p.stdout, summary(p)

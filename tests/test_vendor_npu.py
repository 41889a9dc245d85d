"""A vendor, end to end: a simulated ``npu`` backend certified with an expectations file.

tests/vendor_npu/ holds what a vendor writes: ``npu.yaml`` (a device spec that
``extends: cuda`` with three declared differences), ``expectations.yaml`` (an
xfail, a waiver, a not-supported entry and an entry for another device), and
``npu_backend.py``, loaded with ``-p``: PrivateUse1 renamed ``npu`` and one
autocast kernel per spec op registered with ``torch.library`` at
``AutocastPrivateUse1``. The suite runs in ``--policy-only`` mode (FakeTensors of
device ``npu`` carry the AutocastPrivateUse1 key, so the kernels really run).

Two certifications run side by side: the vendor as shipped (conformant) and the
same vendor with an undeclared difference (aten::exp registered as
lower_precision_fp while its spec says fp32) and a kernel that aborts the process
once (aten::mm). The second must be recorded as crash + fail, finish every other
test, and verify as NOT conformant.

The deviating run is a fresh process; the shipped run and both ``verify-bundle`` runs fork from
the warm server meanwhile (helpers/warm_runs.py: torch and the suite imported once; each
certification's workers are fresh processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.certify_helpers import (
    VENDOR_DIR,
    Run,
    certification,
    finish,
    pytest_cmd,
    results,
    start,
    with_status,
)
from helpers.once import once_per_run
from helpers.warm_runs import pytest_run, verify_run

pytestmark = pytest.mark.slow

DEVIATION = "aten::exp=lower_precision_fp"
ABORTING_OP = "aten::mm"


def certify_args(out: Path) -> list[str]:
    return [
        "-p",
        "npu_backend",
        "--pyargs",
        "conformance",
        "--backend",
        "npu",
        "--policy-only",
        "--spec",
        str(VENDOR_DIR / "npu.yaml"),
        "--expectations",
        str(VENDOR_DIR / "expectations.yaml"),
        "--certify",
        str(out),
    ]


Bundles = dict[str, tuple[Path, Run, Run]]


def certify_both(root: Path) -> dict[str, Run]:
    """The two certifications side by side, then each bundle verified: ``<name>`` (the run) and
    ``<name>-verify`` (verify-bundle) for ``shipped`` and ``deviating``."""
    env = {"PYTHONPATH": str(VENDOR_DIR)}
    planted = {
        **env,
        "NPU_SIM_DEVIATE": DEVIATION,
        "NPU_SIM_ABORT": ABORTING_OP,
        "NPU_SIM_ABORT_MARKER": str(root / "aborted-once"),
    }
    deviating = start(pytest_cmd(*certify_args(root / "deviating")), root, planted)
    done = {"shipped": pytest_run(certify_args(root / "shipped"), env)}
    done["shipped-verify"] = verify_run(root / "shipped", env)
    done["deviating"] = finish(deviating, root)
    done["deviating-verify"] = verify_run(root / "deviating", planted)
    return done


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    """Certified once per test run, whichever xdist worker asks first (helpers/once.py)."""
    root, runs = once_per_run(tmp_path_factory, "npu", certify_both)
    return {name: (root / name, runs[name], runs[f"{name}-verify"]) for name in ("shipped", "deviating")}


def test_shipped_vendor_is_conformant(bundles: Bundles) -> None:
    out, cert, ver = bundles["shipped"]
    assert cert.rc == 0, cert.repro()
    assert ver.rc == 0 and "verdict: conformant" in ver.out, ver.repro()
    meta = certification(out)
    assert meta["options"]["backend"] == "npu" and meta["options"]["policy_only"], meta["options"]
    assert meta["stale_expectations"] == [], meta["stale_expectations"]


def test_declared_exceptions_get_their_status(bundles: Bundles) -> None:
    out, cert, _ = bundles["shipped"]
    res = results(out)
    waived, xfail, unsupported = (with_status(res, s) for s in ("waived", "xfail", "not-supported"))
    xfail = [t for t in xfail if not res[t]["note"].startswith("suite xfail")]  # torch's own known bugs
    assert waived and all("aten::cosh" in t for t in waived), (waived, cert.repro())
    # atan2's tests, and the random-mix property, whose certified (derandomized) draw meets atan2
    mixes = "conformance/test_hypothesis.py::test_random_dtype_mixes[npu-float16]"
    assert xfail and all("aten::atan2" in t or t == mixes for t in xfail), (xfail, cert.repro())
    declared = ("aten::grid_sampler", "gru_cell", "test_cache.py", "test_custom_function.py")
    assert any("aten::grid_sampler" in t for t in unsupported), (unsupported, cert.repro())
    assert all(any(d in t for d in declared) for t in unsupported), (unsupported, cert.repro())
    assert not any(r["status"] == "skip" and "[xpu-" in t for t, r in res.items())


def test_undeclared_difference_and_crash_fail_the_verdict(bundles: Bundles) -> None:
    out, cert, ver = bundles["deviating"]
    res = results(out)
    crashed = with_status(res, "crash")
    assert len(crashed) == 1 and "aten::mm" in crashed[0], (crashed, cert.repro())
    failed = with_status(res, "fail")
    # the op-level failures name the planted op; the Hypothesis test draws random
    # listed ops (derandomized), so it may catch the same deviation
    assert any("aten::exp" in t for t in failed), (failed[:10], cert.repro())
    assert all("aten::exp" in t or "test_hypothesis.py" in t for t in failed), (failed[:10], cert.repro())
    mm_passed = [t for t in with_status(res, "pass") if "aten::mm" in t]
    assert mm_passed, "after the crash, the other aten::mm tests must still run and pass"
    assert len(res) == len(results(bundles["shipped"][0])), "every test has a result despite the crash"
    assert certification(out)["workers"] == 2, cert.repro()
    assert ver.rc == 1 and "verdict: NOT conformant" in ver.out and "1 crash" in ver.out, ver.repro()

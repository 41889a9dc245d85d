"""acme, the compiled vendor template (examples/vendor_backend/), certified end to end.

acme is a PrivateUse1 backend in C++ whose autocast is C++ too (ATen's KERNEL_PRIVATEUSEONE
macros over the shared AT_FORALL_* lists), loaded with ``-p examples.vendor_backend.plugin``.
Its tensors are real (host memory, CPU kernels through a boxed fallback), so the suite runs
every category on the device, numerics against a CPU reference.

* the shipped backend certifies conformant over every dtype, and ``verify-bundle`` agrees;
* three deviations planted in C++ (``ACME_DEVIATION``: one library each, cached) fail the
  run, on the tests of the op they touch: a moved policy, a missing and an extra kernel;
* a kernel that aborts and one that never returns are recorded ``crash`` and ``timeout``
  and the certification completes. These two runs declare every test outside the
  mandatory core ``skip`` in an expectations file (a user-facing option), to stay short.

The libraries are built on first use by the suite's own processes (the plugin), into a
cache keyed by their sources (examples/vendor_backend/build.py; ``$ACME_BUILD_DIR``), so a
second run compiles nothing and concurrent processes wait for one build.

Each run forks from the warm server (helpers/warm_runs.py): torch and the suite are imported
once, acme is loaded in the run's own process (it reads ``ACME_DEVIATION`` there), and a
certification's workers are fresh processes.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from helpers.certify_helpers import REPO, Run, certification, results, with_status
from helpers.once import once_per_run
from helpers.warm_runs import pytest_run, verify_run

from autocast_spec.model import Spec
from examples.vendor_backend.build import missing_toolchain

EXAMPLE = REPO / "examples" / "vendor_backend"
SPEC_FILE = EXAMPLE / "acme.yaml"

_no_toolchain = missing_toolchain()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_no_toolchain is not None, reason=f"acme cannot be built: {_no_toolchain}"),
]


def env(deviation: str | None = None, **more: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "ACME_DEVIATION": deviation or "", **more}


def suite_args(*args: str) -> list[str]:
    return [
        "-p",
        "examples.vendor_backend.plugin",
        "--pyargs",
        "conformance",
        "--backend",
        "acme",
        "--spec",
        str(SPEC_FILE),
        "--reference-device",
        "cpu",
        *args,
    ]


def failed_ids(r: Run) -> list[str]:
    """The stable ids (``conformance/test_x.py::...``) of the FAILED lines of a ``-rf`` run."""
    lines = (line.split(" - ")[0] for line in r.out.splitlines() if line.startswith("FAILED "))
    return sorted(line[line.index("conformance/test_") :] for line in lines)


# ---------------------------------------------------------------------------
# The shipped backend
# ---------------------------------------------------------------------------

# categories that need real tensors (policy-only reports them skipped), per dtype where they have one
REAL_TENSOR_CATEGORIES: dict[str, set[str | None]] = {
    "numerics": {"float16", "bfloat16"},
    "autograd": {"float16", "bfloat16"},
    "cache": {"float16", "bfloat16"},
    "custom_function": {"float16", "bfloat16"},
    "transitions": {None},
}


def test_shipped_backend_certifies_conformant_on_real_tensors(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    cert = pytest_run(suite_args("--dtype", "all", "--certify", str(out)), env())
    assert cert.rc == 0 and "verdict: conformant" in cert.out, cert.repro()
    ver = verify_run(out, env())
    assert ver.rc == 0 and "verdict: conformant" in ver.out, ver.repro()
    opts = certification(out)["options"]
    assert (opts["backend"], opts["dtype"], opts["policy_only"], opts["reference_device"]) == (
        "acme",
        "all",
        False,
        "cpu",
    ), opts
    res = results(out)
    assert not [i for i, r in res.items() if r["status"] not in ("pass", "xfail", "skip")], cert.repro()
    for category, dtypes in REAL_TENSOR_CATEGORIES.items():
        passed = {r["dtype"] for r in res.values() if (r["category"], r["status"]) == (category, "pass")}
        assert passed >= dtypes, f"{category}: tests passed on acme only for {passed}: {cert.repro()}"


# ---------------------------------------------------------------------------
# Deviations planted in acme_autocast.cpp: the run fails on the tests of that op
# (the shipped backend passes every one of them: the test above)
# ---------------------------------------------------------------------------

PLANTED = {
    # deviation: (op, a test that must fail, a test of the op that must still pass)
    "moved": (
        "aten::batch_norm",
        "conformance/test_op_policy.py::test_op_policy[acme-float16-fp32-aten::batch_norm-torch.batch_norm]",
        "conformance/test_registration.py::test_registration[acme-fp32-aten::batch_norm]",
    ),
    "missing": (
        "aten::binary_cross_entropy",
        "conformance/test_registration.py::test_registration[acme-fp32-aten::binary_cross_entropy]",
        "conformance/test_eligibility.py::test_eligibility[acme-float16-fp32-aten::binary_cross_entropy-float64]",
    ),
    "extra": (
        "aten::_addmm_activation",
        "conformance/test_registration.py::test_registration[acme-unlisted-aten::_addmm_activation]",
        None,
    ),
}


@pytest.mark.parametrize("deviation", sorted(PLANTED))
def test_planted_deviation_fails_its_op(deviation: str) -> None:
    op, must_fail, must_pass = PLANTED[deviation]
    r = pytest_run(suite_args("-rf", "-vv", "-k", op), env(deviation))
    failed = failed_ids(r)
    assert r.rc == 1 and must_fail in failed, (failed, r.repro())
    assert all(op in t for t in failed), (failed, r.repro())
    assert must_pass is None or f"{must_pass} PASSED" in r.out, r.repro()


# ---------------------------------------------------------------------------
# Kernels that abort or hang: recorded, and the certification completes
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mandatory_core_only(spec: Spec, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An expectations file that skips every test function outside the mandatory core (written
    once per test run, whichever xdist worker asks first: helpers/once.py)."""
    where, _ = once_per_run(tmp_path_factory, "expectations", functools.partial(write_core_only, spec))
    return where / CORE_ONLY


CORE_ONLY = "mandatory-core-only.yaml"


def write_core_only(spec: Spec, where: Path) -> dict[str, Run]:
    core = " or ".join(spec.rules.mandatory_core)
    every, mandatory = (pytest_run(suite_args("--collect-only", *m), env()) for m in ((), ("-m", core)))
    ids = {line for line in every.out.splitlines() if line.startswith("conformance/")}
    kept = {line for line in mandatory.out.splitlines() if line.startswith("conformance/")}
    assert ids and kept, every.repro() + mandatory.repro()
    functions: dict[str, bool] = {}
    for test_id in ids:
        fn = test_id.split("[")[0]
        functions[fn] = functions.get(fn, False) or test_id in kept
    lines = ["kind: expectations", "expectations:"]
    for fn in sorted(f for f, has_core in functions.items() if not has_core):
        lines += [f'  - match: "{fn}[*"', "    status: skip", '    reason: "outside the mandatory core"']
    (where / CORE_ONLY).write_text("\n".join(lines) + "\n")
    return {"every": every, "mandatory": mandatory}


BROKEN = {"abort": ("crash", "aten::atan2"), "hang": ("timeout", "aten::cosh")}


def statuses(res: Mapping[str, Mapping[str, object]]) -> set[object]:
    return {r["status"] for r in res.values()}


@pytest.mark.parametrize("deviation", sorted(BROKEN))
def test_broken_kernel_is_recorded_and_the_run_completes(
    deviation: str, mandatory_core_only: Path, tmp_path: Path
) -> None:
    status, op = BROKEN[deviation]
    out = tmp_path / "bundle"
    args = suite_args("--expectations", str(mandatory_core_only), "--test-timeout", "10")
    args += ["--certify", str(out)]
    # the kernel breaks the first time any process runs it (the marker file says it did)
    cert = pytest_run(args, env(deviation, ACME_TRIP_ONCE=str(tmp_path / "tripped")))
    res = results(out)
    broken = with_status(res, status)
    assert cert.rc == 1 and len(broken) == 1 and op in broken[0], (broken, cert.repro())
    # besides the broken op: passes, skips and torch's own known bugs (the suite's xfails)
    others = {r["status"] for r in res.values() if not r["note"].startswith("suite xfail")}
    assert others == {"pass", "skip", status}, (statuses(res), cert.repro())
    collected = json.loads((out / "collected.json").read_text())
    assert len(res) == len(collected), "every collected test has a result"
    assert any(op in t for t in with_status(res, "pass")), "the op's other tests ran after it broke"
    assert certification(out)["verdict"]["conformant"] is False, cert.repro()

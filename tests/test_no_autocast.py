"""A backend without autocast (``no_autocast``), the dtypes torch.autocast accepts
(``supported_dtypes`` with float32), and the Python Autocast kernels of higher-order operators
(``higher_order_ops``): stated in the spec, and checked by the suite.

The backend without autocast is tests/vendor_npu's simulated npu with ``NPU_SIM_NO_AUTOCAST=1``
(its ``get_amp_supported_dtype()`` returns ``[]`` and it registers no Autocast kernel and no
fallthrough, as torch-rbln 0.12.0 does): it proves what the suite checks, not torch-rbln.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.suite_runs import ROOT, TESTS, run_suite, summary

from autocast_spec.problems import SpecError
from conformance.target import Options, TargetError, resolve_target
from reference_impl.spectools.installed_spec import load_installed_spec

NONE = """kind: device
device: npu
dispatch_key: AutocastPrivateUse1
builtin: false
torch: ">=2.13,<2.14"
default_dtype: float16
no_autocast:
  reason: "simulated: get_amp_supported_dtype() returns []"
  direct_enabling: {direct}
{message}unsupported_dtype:
  action: warn_and_disable
  message: "In {{device}} autocast, but the target dtype is not supported. Disabling autocast."
"""
ERROR = (
    "  message: \"Could not run '[^']+' with arguments from the 'Autocast({device}|PrivateUse1)' backend\"\n"
)


def _file(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "npu.yaml"
    f.write_text(text, encoding="utf-8")
    return f


def test_no_autocast_validates_and_loads(tmp_path: Path) -> None:
    f = _file(tmp_path, NONE.format(direct="error", message=ERROR))
    ds = load_installed_spec([f], check_registry=False).devices["npu"]
    assert ds.no_autocast is not None and ds.no_autocast.direct_enabling == "error"
    assert ds.supported_dtypes == () and ds.lower_dtypes == () and not ds.ops


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (NONE.format(direct="error", message=""), "direct_enabling error needs its 'message'"),
        (
            NONE.format(direct="fallthrough", message="") + "ops:\n  fp32: [aten::mm]\n",
            "may not also give ops",
        ),
        (NONE.format(direct="fallthrough", message="").split("unsupported_dtype:")[0], "unsupported_dtype"),
        (
            NONE.replace("no_autocast:", "supported_dtypes: []\nno_autocast:").format(
                direct="fallthrough", message=""
            ),
            "",
        ),
    ],
)
def test_no_autocast_says_what_it_lacks(tmp_path: Path, text: str, words: str) -> None:
    with pytest.raises(SpecError) as e:
        load_installed_spec([_file(tmp_path, text)], check_registry=False)
    assert words in "\n".join(str(p) for p in e.value.problems), e.value.problems


def _sim_run(tmp_path: Path, text: str, *args: str, no_autocast: bool = True):  # type: ignore[no-untyped-def]
    f = _file(tmp_path, text)
    env = {"PYTHONPATH": f"{ROOT}:{TESTS / 'vendor_npu'}"}
    plugin_env = {"NPU_SIM_NO_AUTOCAST": "1"} if no_autocast else {}
    cmd = ("-p", "npu_backend", "--backend", "npu", "--policy-only", "--spec", str(f), "-p", "no:randomly")
    return run_suite(*cmd, *args, env_extra=env, plugin_env=plugin_env)


@pytest.mark.slow
def test_a_backend_without_autocast_gets_one_verdict(tmp_path: Path) -> None:
    """It passes its own checks, one per dtype a user may ask for and one for direct enabling,
    with every test that needs an autocast dtype deselected (not a thousand failures)."""
    p = _sim_run(
        tmp_path, NONE.format(direct="error", message=ERROR), "-m", "context or registration or no_autocast"
    )
    assert p.returncode == 0 and "3 passed" in p.stdout and "has no autocast" in p.stdout, summary(p)
    # declared as falling through, while the backend registers no fallthrough: one failure
    p = _sim_run(
        tmp_path,
        NONE.format(direct="fallthrough", message=""),
        "-m",
        "context or registration or no_autocast",
    )
    assert p.returncode == 1 and "1 failed, 2 passed" in p.stdout, summary(p)
    assert "test_no_autocast[npu-float16-direct_enabling]" in p.stdout, summary(p)


@pytest.mark.slow
def test_a_backend_with_autocast_fails_the_no_autocast_checks(tmp_path: Path) -> None:
    p = _sim_run(tmp_path, NONE.format(direct="error", message=ERROR), "-k", "no_autocast", no_autocast=False)
    assert p.returncode == 1 and "3 failed" in p.stdout, summary(p)


def test_no_dtype_to_choose_without_autocast(tmp_path: Path) -> None:
    f = _file(tmp_path, NONE.format(direct="error", message=ERROR).replace("device: npu", "device: cpu"))
    f.write_text(f.read_text().replace("AutocastPrivateUse1", "AutocastCPU"))
    with pytest.raises(TargetError, match="states no autocast"):
        resolve_target(Options("cpu", "float16", (str(f),), None, False))


def test_float32_is_supported_but_not_tested() -> None:
    """torch_npu accepts float32 as an autocast dtype (its warning names it): supported_dtypes
    says so, and the dtypes tested are the lower ones."""
    f = ROOT / "spec" / "vendors" / "torch_npu.yaml"
    ds = load_installed_spec([f], check_registry=False).devices["npu"]
    assert "float32" in ds.supported_dtypes and ds.lower_dtypes == ("float16", "bfloat16")


def test_higher_order_kernels_are_stated_and_checked(tmp_path: Path) -> None:
    """torch's flex_attention kernel at AutocastCPU (lower_precision_fp on query, key, value):
    listed in spec/cpu.yaml, it passes; declared uncast it fails, left out it is unlisted."""
    cpu = (ROOT / "spec" / "cpu.yaml").read_text(encoding="utf-8")
    ds = load_installed_spec(check_registry=False).devices["cpu"]
    assert [(k.op, k.policy, k.args) for k in ds.higher_order_ops] == [
        ("flex_attention", "lower_precision_fp", ("query", "key", "value"))
    ]
    args = ("--backend", "cpu", "--dtype", "all", "-k", "higher_order")
    p = run_suite(*args)
    assert p.returncode == 0 and "3 passed" in p.stdout, summary(p)
    uncast = _file(tmp_path, cpu.replace("policy: lower_precision_fp, args", "policy: none, args"))
    p = run_suite(*args, "--spec", str(uncast))
    assert p.returncode == 1 and "2 failed, 1 passed" in p.stdout, summary(p)
    gone = _file(
        tmp_path,
        "\n".join(x for x in cpu.splitlines() if "flex_attention" not in x and x != "higher_order_ops:"),
    )
    p = run_suite(*args, "--spec", str(gone))
    assert (
        p.returncode == 1
        and "test_higher_order_kernel[cpu-unlisted-higher_order::flex_attention]" in p.stdout
    )


def test_no_empty_mandatory_test_where_nothing_is_declared() -> None:
    """A backend with autocast and no higher-order kernels on its key (mps) has no case of
    test_no_autocast or test_higher_order_kernel: both are deselected, not skipped as an empty
    parameter set (a skip in the mandatory core refuses certification)."""
    p = run_suite("--backend", "mps", "--policy-only", "-k", "test_no_autocast or test_higher_order_kernel")
    assert p.returncode == 5 and "skipped" not in p.stdout and "deselected" in p.stdout, summary(p)

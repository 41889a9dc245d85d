"""A device's rules under another name: ``DeviceSpec.renamed`` and ``Spec.with_device``.

A PrivateUse1 backend renamed by ``torch.utils.rename_privateuse1_backend`` with no
device file of its own is tested against ``spec/privateuse1.yaml`` under its own name:
the policy engine acts only for the device a DeviceSpec is named (it would otherwise
expect every op to fall through: "autocast state is for 'npu', the spec for 'privateuse1'").
"""

from __future__ import annotations

from pathlib import Path

from helpers.suite_runs import TESTS, run_suite, summary, with_tests_on_path

from reference_impl.spectools.installed_spec import load_installed_spec

SPEC = load_installed_spec()


def test_with_device_names_the_copy_and_leaves_the_spec_alone() -> None:
    pu1 = SPEC.device("privateuse1")
    renamed = SPEC.with_device("npu", pu1)
    assert renamed.device("npu") == pu1.renamed("npu")
    assert renamed.device("npu").device == "npu" and renamed.device("npu").ops == pu1.ops
    assert "npu" not in SPEC.devices and SPEC.device("privateuse1").device == "privateuse1"
    assert {n: d for n, d in renamed.devices.items() if n != "npu"} == dict(SPEC.devices)


def test_renamed_privateuse1_backend_is_held_to_the_privateuse1_spec() -> None:
    """The simulated npu vendor (tests/vendor_npu), without --spec: the bundled privateuse1 rules."""
    args = (
        "-p",
        "vendor_npu.npu_backend",
        "--backend",
        "npu",
        "--policy-only",
        "-k",
        "(test_op_policy and aten::mm-) or test_unsupported_dtype",
    )
    p = run_suite(*args, env_extra=with_tests_on_path())
    # the unsupported-dtype warning names the backend as torch renamed it ("In npu autocast")
    assert p.returncode == 0 and "6 passed" in p.stdout, (
        f"{summary(p)}\nreproduce:\n  PYTHONPATH=tests python -m pytest conformance -q {' '.join(args[:-1])} "
        f"'{args[-1]}'"
    )


def test_failure_snippet_imports_the_backend_plugin(tmp_path: Path) -> None:
    """A failure's reproduction snippet imports the modules the run loaded with -p: without
    the vendor's backend module, ``torch.randn(...).to('npu')`` cannot run."""
    spec = tmp_path / "npu.yaml"
    text = (TESTS / "vendor_npu" / "npu.yaml").read_text()
    difference = "  fp32:\n    - aten::prelu "
    planted = text.replace(difference, "  lower_precision_fp:\n    - aten::prelu ")
    assert planted != text
    spec.write_text(planted)  # the backend keeps prelu in fp32; the spec now says cuda's lower
    args = ("-p", "vendor_npu.npu_backend", "--backend", "npu", "--policy-only", "--spec", str(spec))
    p = run_suite(*args, "-k", "test_op_policy and aten::prelu-", env_extra=with_tests_on_path())
    assert p.returncode == 1 and "reproduce:" in p.stdout, summary(p)
    snippet = p.stdout.split("reproduce:", 1)[1]
    assert "import torch\n    import vendor_npu.npu_backend\n" in snippet, snippet[:400]

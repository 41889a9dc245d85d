"""extract on a vendor's own registration forms, as its spec file's ``vendor.source_forms`` name them.

The fixture (tests/fixtures/extract/vendor_forms/, our own text in the shape of IPEX 2.8.0's
sources) opens its blocks through macros of its own and registers a kernel template that takes a
cast policy per autocast dtype; one op gets its Autocast kernel through
``m.impl(NAME, c10::DispatchKey::AutocastCPU, fn)`` in a fragment block.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conformance.cli import main

FORMS = Path(__file__).parent / "fixtures" / "extract" / "vendor_forms"
SRC, VENDOR = FORMS / "src", FORMS / "vendor.yaml"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_vendor_forms_give_a_policy_per_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["extract", str(SRC), "--spec", str(VENDOR)], capsys)
    assert rc == 0, err
    data = yaml.safe_load(out)
    assert data["ops"] == {
        "lower_precision_fp": [
            {"op": "aten::group_norm", "by_dtype": {"float16": "none"}},
            {"op": "aten::mm", "by_dtype": {"float16": "fp32"}},
        ],
        "fp32": ["aten::avg_pool3d"],
        "promote": ["aten::cat"],
    }
    # the fragment's m.impl with the AutocastCPU key is read (its kernel is its own: no policy);
    # the same op's CPU kernel beside it is not autocast's
    assert list(data["not_observed"]) == ["aten::_adaptive_avg_pool3d"]
    assert (data["builtin"], data["torch"], data["default_dtype"]) == (False, ">=2.8", "bfloat16")


def test_without_the_vendor_file_the_block_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(["extract", str(SRC / "autocast.cpp"), "--device", "cpu"], capsys)
    assert rc == 2 and "\n" not in err.strip(), err
    assert f"{SRC / 'autocast.cpp'}:" in err and "vendor.source_forms.block_macros" in err, err


def test_a_policy_constant_the_file_does_not_name_is_not_observed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "autocast.cpp"
    text = (SRC / "autocast.cpp").read_text(encoding="utf-8")
    src.write_text(text.replace("REGISTER_TWO(cat, promote, promote)", "REGISTER_TWO(cat, promote, widest)"))
    (tmp_path / "library.h").write_text((SRC / "library.h").read_text(encoding="utf-8"))
    rc, out, err = _run(["extract", str(src), "--spec", str(VENDOR)], capsys)
    assert rc == 0, err
    why = yaml.safe_load(out)["not_observed"]["aten::cat"]
    assert "'PerDtype::widest' under float16 is none the vendor file names" in why, why
    assert "warning: no policy for aten::cat" in err


def test_diff_lays_the_vendor_kernels_over_torch_s(capsys: pytest.CaptureFixture[str]) -> None:
    """The vendor's kernels replace torch's only for the ops they name: every other op of the bundled
    cpu list is on the extract side (this vendor file lists only its own ops, so they read as added),
    and the vendor's ops compare with the file's."""
    rc, out, err = _run(["diff", str(VENDOR), f"extract:{SRC}", "--format", "json"], capsys)
    assert rc == 0, err
    d = json.loads(out)
    assert d["ops"]["removed"] == [] and d["ops"]["changed"] == [], d["ops"]
    added = {e["op"] for e in d["ops"]["added"]}
    assert {"aten::avg_pool3d", "aten::cat", "aten::addmm", "aten::conv2d"} <= added
    assert not added & {"aten::mm", "aten::group_norm", "aten::_adaptive_avg_pool3d"}


def test_a_changed_per_dtype_policy_shows_in_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vendor = tmp_path / "vendor.yaml"
    vendor.write_text(
        VENDOR.read_text(encoding="utf-8").replace("{op: aten::mm, by_dtype: {float16: fp32}}", "aten::mm")
    )
    rc, out, err = _run(["diff", str(vendor), f"extract:{SRC}", "--format", "json"], capsys)
    assert rc == 0, err
    changed = json.loads(out)["ops"]["changed"]
    want = {"op": "aten::mm", "from": "lower_precision_fp", "to": "lower_precision_fp (float16: fp32)"}
    assert changed == [want], changed


def test_a_vendor_device_torch_has_no_list_for_is_compared_as_extracted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch registers no AutocastXLA kernels: nothing is laid under torch_xla's (once a KeyError)."""
    src = tmp_path / "autocast_mode.cpp"
    src.write_text("TORCH_LIBRARY_IMPL(aten, AutocastXLA, m) {\n  KERNEL_XLA(mm, lower_precision_fp)\n}\n")
    vendor = Path(__file__).parents[1] / "spec" / "vendors" / "torch_xla.yaml"
    rc, out, err = _run(["diff", str(vendor), f"extract:{src}", "--format", "json"], capsys)
    assert rc == 0, err
    ops = json.loads(out)["ops"]
    removed = {e["op"] for e in ops["removed"]}
    assert (
        ops["added"] == [] and ops["changed"] == [] and "aten::bmm" in removed and "aten::mm" not in removed
    )


def _vendor_copy(tmp_path: Path, old: str = "", new: str = "") -> Path:
    """The fixture's vendor file, changed, beside a copy of its sources."""
    (tmp_path / "src").mkdir()
    for f in SRC.iterdir():
        (tmp_path / "src" / f.name).write_text(f.read_text(encoding="utf-8"))
    vendor = tmp_path / "vendor.yaml"
    vendor.write_text(VENDOR.read_text(encoding="utf-8").replace(old, new))
    return vendor


def test_a_vendor_fallthrough_is_not_given_torch_s_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fallthrough the vendor registers replaces torch's kernel too: the op is not autocast."""
    vendor = _vendor_copy(tmp_path)
    src = tmp_path / "src" / "autocast.cpp"
    text = src.read_text(encoding="utf-8")
    src.write_text(
        text.replace(
            "  REGISTER_TWO(cat, promote, promote)\n",
            "  REGISTER_TWO(cat, promote, promote)\n"
            '  m.impl("conv2d", torch::CppFunction::makeFallthrough());\n',
        )
    )
    rc, out, err = _run(["diff", str(vendor), f"extract:{tmp_path / 'src'}", "--format", "json"], capsys)
    assert rc == 0, err
    added = {e["op"] for e in json.loads(out)["ops"]["added"]}
    assert "aten::addmm" in added and "aten::conv2d" not in added, added


@pytest.mark.parametrize("release", ["2.9", "2.13"])
def test_the_overlay_is_torch_s_list_of_the_release_asked_for(
    release: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _run(["diff", str(VENDOR), f"extract:{SRC}", "--torch-version", release], capsys)
    assert rc == 0, err
    assert f"keep torch {release}'s cpu kernels" in out, out


def test_a_vendor_release_the_bundled_spec_does_not_cover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vendor = _vendor_copy(tmp_path, 'torch: ">=2.8"', 'torch: ">=2.5,<2.6"')
    rc, out, err = _run(["diff", str(vendor), f"extract:{tmp_path / 'src'}"], capsys)
    assert rc == 0, err
    assert "the bundled spec does not cover torch 2.5: the vendor's kernels alone" in out, out


@pytest.mark.parametrize("spec", ["spec", "cuda", "no/such/file.yaml"])
def test_spec_must_be_one_device_file(spec: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(["extract", str(SRC), "--spec", spec], capsys)
    assert rc == 2 and "name one device's spec file" in err and "\n" not in err.strip(), err


def test_a_block_macro_may_not_shadow_torch_s(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vendor = _vendor_copy(
        tmp_path, "block_macros: {", "block_macros: {TORCH_LIBRARY_IMPL: TORCH_LIBRARY_FRAGMENT, "
    )
    rc, _, err = _run(["validate", str(vendor)], capsys)
    assert rc == 2 and "'TORCH_LIBRARY_IMPL' should not be valid" in err, err


def test_a_vendor_device_no_bundled_file_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A user's own vendor file for a PrivateUse1 backend: its dtypes come from the file itself
    (extract once asked for --dtypes-from, which --spec refuses)."""
    vendor = _vendor_copy(
        tmp_path, "device: cpu\ndispatch_key: AutocastCPU", "device: mynpu\ndispatch_key: AutocastPrivateUse1"
    )
    for src in (tmp_path / "src").glob("*.cpp"):
        src.write_text(src.read_text(encoding="utf-8").replace("AutocastCPU", "AutocastPrivateUse1"))
    rc, out, err = _run(["extract", str(tmp_path / "src"), "--spec", str(vendor)], capsys)
    assert rc == 0, err
    data = yaml.safe_load(out)
    assert (data["device"], data["dispatch_key"], data["default_dtype"]) == (
        "mynpu",
        "AutocastPrivateUse1",
        "bfloat16",
    )
    assert {"op": "aten::mm", "by_dtype": {"float16": "fp32"}} in data["ops"]["lower_precision_fp"]

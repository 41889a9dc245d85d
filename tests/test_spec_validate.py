"""``autocast-spec validate`` and ``list``: good input passes, each kind of bad input
gives exit 2 and one clear line naming file, line and problem, never a traceback."""

from __future__ import annotations

import json
import textwrap
import typing
from pathlib import Path

import pytest

from autocast_spec import vocabulary
from autocast_spec.files import SCHEMA_FILE, bundled_spec_dir
from conformance.cli import main

VENDOR_HEADER = """\
kind: device
device: npu
extends: cuda
dispatch_key: AutocastPrivateUse1
torch: ">=2.13"
"""


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_bundled_spec_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "validate")
    assert code == 0
    assert out.startswith("ok:")


def test_vendor_file_extending_cuda_is_valid(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = write(tmp_path, "npu.yaml", VENDOR_HEADER + "remove: [aten::cudnn_convolution]\n")
    code, out, err = run_cli(capsys, "validate", str(f))
    assert code == 0, err
    assert "npu (118 ops)" in out


# Each case: file text, the line the error must name, a fragment of the message.
BAD_INPUT = {
    "yaml-syntax": (VENDOR_HEADER + "ops:\n  fp32: [aten::exp\n", 8, "flow sequence at line 7"),
    "yaml-indent": (VENDOR_HEADER + "ops:\n  fp32: [aten::exp]\n bad: 1\n", 8, "YAML syntax error"),
    "schema-missing-key": (
        "kind: device\ndevice: npu\nextends: cuda\n",
        1,
        "'torch' is a required property",
    ),
    "schema-wrong-type": (VENDOR_HEADER + "supported_dtypes: float16\n", 6, "supported_dtypes"),
    "unknown-policy": (VENDOR_HEADER + "ops:\n  fp16: [aten::mm]\n", 6, "unknown policy 'fp16'"),
    "unknown-dtype": (VENDOR_HEADER + "default_dtype: float17\n", 6, "float17"),
    "unknown-op": (
        VENDOR_HEADER + "ops:\n  fp32:\n    - aten::layer_nrom\n",
        8,
        "did you mean aten::layer_norm",
    ),
    "two-policies": (
        VENDOR_HEADER + "ops:\n  fp32: [aten::exp]\n  promote:\n    - aten::exp\n",
        9,
        "aten::exp is listed under two policies: fp32 and promote",
    ),
    "banned-without-message": (
        VENDOR_HEADER + "ops:\n  banned:\n    - aten::mse_loss\n",
        8,
        "banned op aten::mse_loss has no 'message'",
    ),
    "remove-unlisted": (
        VENDOR_HEADER + "remove:\n  - aten::add.Tensor\n",
        7,
        "does not list aten::add.Tensor",
    ),
    "duplicate-key": (VENDOR_HEADER + "device: npu2\n", 6, "duplicate key 'device'"),
    # a key YAML reads as a number, beside string keys (a version written unquoted)
    "non-string-key": (VENDOR_HEADER + "2.15: a note\n", 1, "unknown key 2.15"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_names_file_and_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str) -> None:
    text, line, fragment = BAD_INPUT[case]
    f = write(tmp_path, "vendor.yaml", text)
    code, _, err = run_cli(capsys, "validate", str(f))
    assert code == 2
    assert f"vendor.yaml:{line}:" in err, err
    assert fragment in err, err


def test_extends_cycle(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    base = 'kind: device\ndispatch_key: AutocastPrivateUse1\ntorch: ">=2.13"\n'
    write(tmp_path, "a.yaml", base + "device: a\nextends: b\n")
    write(tmp_path, "b.yaml", base + "device: b\nextends: a\n")
    code, _, err = run_cli(capsys, "validate", str(tmp_path))
    assert code == 2
    assert "cycle in 'extends'" in err and ":5:" in err, err


def test_several_problems_one_line_each(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = VENDOR_HEADER + "ops:\n  fp32: [aten::expp, aten::exp]\n  promote: [aten::exp]\n"
    f = write(tmp_path, "v.yaml", text)
    code, _, err = run_cli(capsys, "validate", str(f))
    assert code == 2
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 2, err
    assert any("aten::expp" in x and "did you mean aten::exp" in x for x in lines)
    assert any("two policies" in x for x in lines)


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(capsys, "validate", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert "nope.yaml: no such file or directory" in err


def test_unknown_subcommand_and_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "frobnicate")[0] == 2
    assert run_cli(capsys, "list", "--device", "cpu", "--format", "xml")[0] == 2


def test_list_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "list", "--device", "xpu", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert {
        "device",
        "torch",
        "default_dtype",
        "supported_dtypes",
        "ops",
        "jit_limitations",
    } <= set(data)
    assert data["device"] == "xpu"
    assert data["ops"]["aten::mm"] == "lower_precision_fp"
    assert "aten::cudnn_convolution" not in data["ops"]  # removed by xpu.yaml over cuda


def test_list_unknown_device(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(capsys, "list", "--device", "tpu")
    assert code == 2
    assert "--device tpu" in err and "cuda" in err


def test_list_after_inheritance_table_and_yaml(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "list", "--device", "maia")
    assert code == 0 and "fp32_append_dtype" in out
    code, out, _ = run_cli(capsys, "list", "--device", "cpu", "--format", "yaml")
    assert code == 0 and "default_dtype: bfloat16" in out


# Every declaration cites its source: a bundled entry of each kind, its source taken away
# (or 'none' left without 'seen_on'), fails validation at the entry's file and line.
SPEC_DIR = Path(__file__).resolve().parent.parent / "spec"
UNCITED = {
    "known-bug": ("rules.yaml", "    source: https://github.com/pytorch/pytorch/issues/132715\n", ""),
    "jit-limitation": (
        "jit.yaml",
        "    source: https://github.com/pytorch/pytorch/blob/v2.13.0/test/test_jit_autocast.py"
        "  # test_jit_autocast.py test_autocast_decorator_outside_jit, test_eager_and_script\n",
        "",
    ),
    "mode-divergence": ("jit.yaml", ', source: none, seen_on: "2.11"', ""),
    "functorch-gap": (
        "ops/matmul.yaml",
        "        source: https://github.com/pytorch/pytorch/issues/192617\n",
        "",
    ),
    "functorch-gap-none-without-seen-on": ("ops/fft.yaml", '        seen_on: "2.13"\n', ""),
    "kernel-gap": ("ops/nn.yaml", '        source: none\n        seen_on: "2.13"\n', ""),
}


@pytest.mark.parametrize("case", sorted(UNCITED))
def test_declaration_without_source_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    import shutil

    name, cut, put = UNCITED[case]
    root = tmp_path / "spec"
    shutil.copytree(SPEC_DIR, root, ignore=shutil.ignore_patterns("vendors"))
    f = root / name
    text = f.read_text(encoding="utf-8")
    assert cut in text, f"{name} no longer holds {cut!r}: pick another entry"
    at = text[: text.index(cut)].count("\n") + 1
    f.write_text(text.replace(cut, put, 1), encoding="utf-8")
    code, _, err = run_cli(capsys, "validate", str(root))
    assert code == 2, err
    lines = [x for x in err.splitlines() if "cites its source" in x]
    assert lines and all(f"{name}:" in x for x in lines), err
    # the entry's line: at or just above the line taken away
    got = int(lines[0].split(f"{name}:")[1].split(":")[0])
    assert at - 8 <= got <= at, (at, err)


def test_the_model_s_vocabularies_are_the_schema_s() -> None:
    """Each closed vocabulary the model types a field with (autocast_spec/vocabulary.py) allows
    exactly what the schema's enum allows."""
    schema = json.loads((bundled_spec_dir() / SCHEMA_FILE).read_text())
    for name, (literal, path) in vocabulary.SCHEMA.items():
        node = schema["$defs"]
        for step in path.split("."):
            node = node[step] if step in ("items",) or node is schema["$defs"] else node["properties"][step]
        assert set(typing.get_args(literal)) == set(node["enum"]), (name, path, node["enum"])

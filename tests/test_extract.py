"""`autocast-spec extract`: autocast registrations read from C++ source.

The fixtures (tests/fixtures/extract/) are our own C++ in every registration form;
each ``NAME.expected.yaml`` says what extract must read from ``NAME.cpp`` (or the
``NAME/`` tree); each file under ``malformed/`` names, in its first line, the line and
the words of the one error it must give. The real check is the installed torch's
``ATen/autocast_mode.h``: the op lists read from it agree with the bundled cuda spec.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml

from autocast_spec.model import Policy, Spec
from conformance.cli import main
from reference_impl.cli import diff as diff_cmd
from reference_impl.engine.torch_registry import installed_torch_version
from reference_impl.extract.api import extract
from reference_impl.extract.conditions import evaluate
from reference_impl.extract.lexer import spell, tokenize
from reference_impl.extract.macros import Expander, MacroTable, parse_define
from reference_impl.extract.output import ExtractedSpec, to_data, to_yaml
from reference_impl.extract.scan import installed_autocast_header, scan

FIXTURES = Path(__file__).parent / "fixtures" / "extract"
EXPECTED = sorted(FIXTURES.glob("*.expected.yaml"))
MALFORMED = sorted((FIXTURES / "malformed").glob("*.cpp"))


def _repro(source: Path, args: list[str]) -> str:
    return "reproduce: autocast-spec extract " + shlex.join([str(source), *args])


def _extract(source: Path, args: list[str]) -> ExtractedSpec:
    """``extract`` as the command runs it, from the CLI-style ``args`` of an expected file."""
    opts = {"device": None, "defines": [], "dtypes_from": None}
    it = iter(args)
    for a in it:
        if a == "-D":
            opts["defines"].append(next(it))  # type: ignore[union-attr]
        else:
            opts[a.removeprefix("--").replace("-", "_")] = next(it)
    (out,) = extract([source], installed_torch_version(), **opts)  # type: ignore[arg-type]
    return out


def _source_of(expected: Path, data: dict) -> Path:
    stem = data.get("source") or expected.name.removesuffix(".expected.yaml")
    path = FIXTURES / stem
    return path if path.exists() else path.with_suffix(".cpp")


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda p: p.name.removesuffix(".expected.yaml"))
def test_fixture_reads_as_expected(expected: Path) -> None:
    want = yaml.safe_load(expected.read_text(encoding="utf-8"))
    args = [str(a) for a in want.get("args", [])]
    source = _source_of(expected, want)
    out = _extract(source, args)
    got, ex = out.spec, out.extracted
    repro = _repro(source, args)
    table = {op: e.policy.value for op, e in ex.entries.items()}
    assert (got.device, got.dispatch_key) == (want["device"], want["dispatch_key"]), repro
    assert table == want["ops"], f"{repro}\nexpected {want['ops']}\ngot      {table}"
    assert {op: e.message for op, e in ex.entries.items() if e.message} == want.get("messages", {}), repro
    assert {op: e.build for op, e in ex.entries.items() if e.build} == want.get("build", {}), repro
    marked = {op: e.note for op, e in ex.entries.items() if e.note}
    assert set(marked) == set(want.get("marked", {})), repro
    for op, cond in want.get("marked", {}).items():
        assert f"registered only when {cond} [" in marked[op], f"{repro}\n{op}: {marked[op]}"
    assert ex.fallthrough_ops == want.get("fallthrough_ops", []), repro
    assert sorted(ex.unresolved) == want.get("unresolved", []), repro
    if "header" in want:
        assert any(n.endswith(f"read from {FIXTURES / want['header']}.") for n in out.notes), out.notes


@pytest.mark.parametrize("source", MALFORMED, ids=lambda p: p.stem)
def test_malformed_source_is_one_line_exit_2(source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = re.match(r"// expect: (\d+): (.*)$", source.read_text(encoding="utf-8").splitlines()[0])
    assert m, f"{source}: the first line must say '// expect: LINE: words of the error'"
    rc = main(["extract", str(source)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err, f"{_repro(source, [])}\nexit {rc}, stderr:\n{err}"
    assert err.startswith(f"error: {source}:{m.group(1)}: ") and m.group(2) in err, (
        f"{_repro(source, [])}\nwanted line {m.group(1)} with {m.group(2)!r}, got:\n{err}"
    )


def test_installed_header_lists_match_bundled_cuda(spec: Spec) -> None:
    """The AT_FORALL_* lists of the installed torch's ATen/autocast_mode.h, as the bundled spec says."""
    source = FIXTURES / "lists_only.cpp"
    header = installed_autocast_header()
    assert header is not None, "the installed torch ships no include/ATen/autocast_mode.h"
    assert scan([source], (), header).used_torch_header, "the lists did not come from the installed torch"
    listed = {op: e.policy for op, e in _extract(source, []).extracted.entries.items()}
    cuda, xpu = spec.devices["cuda"], spec.devices["xpu"]
    wrong = {op: (p.value, cuda.policy_of(op)) for op, p in listed.items() if cuda.policy_of(op) is not p}
    assert not wrong, f"{header}: list policy vs bundled cuda: {wrong}\n{_repro(source, [])}"
    # xpu is made of the shared lists and the banned op alone: the lists are complete
    xpu_ops = {op for op, e in xpu.ops.items() if e.policy is not Policy.BANNED}
    assert set(listed) == xpu_ops, (
        f"lists - xpu: {set(listed) - xpu_ops}; xpu - lists: {xpu_ops - set(listed)}"
    )


def test_cuda_like_fixture_agrees_with_bundled_cuda() -> None:
    # read for 2.14, the first release with the fixture's standalone linalg_matrix_sqrth; the
    # lists are the installed torch's (unchanged from 2.12 to 2.15)
    d = diff_cmd.compute("cuda", f"extract:{FIXTURES / 'cuda_like.cpp'}", torch_version="2.14")
    assert d.identical, (
        f"autocast-spec diff cuda extract:{FIXTURES / 'cuda_like.cpp'} --torch-version 2.14: {d}"
    )


def test_review_workflow_flags_a_changed_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A PR that moves one op between policies: diff against the spec exits 1 and names it."""
    text = (FIXTURES / "cuda_like.cpp").read_text(encoding="utf-8")
    moved = re.search(r"^ *KERNEL_CUDA\((\w+), lower_precision_fp\)", text, re.MULTILINE)
    assert moved
    pr = tmp_path / "autocast_mode.cpp"
    pr.write_text(text.replace(moved.group(0), f"KERNEL_CUDA({moved.group(1)}, fp32)"), encoding="utf-8")
    argv = ["diff", "cuda", f"extract:{pr}", "--torch-version", "2.14", "--format", "json", "--exit-code"]
    assert main(argv) == 1
    changed = json.loads(capsys.readouterr().out)["ops"]["changed"]
    assert changed == [{"op": f"aten::{moved.group(1)}", "from": "lower_precision_fp", "to": "fp32"}]


def test_output_validates_and_json_matches_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = FIXTURES / "kernel_forms.cpp"
    out = tmp_path / "cpu.yaml"
    assert main(["extract", str(source), "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["extract", str(source), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == yaml.safe_load(out.read_text(encoding="utf-8")) == to_data(_extract(source, []))
    assert main(["diff", str(out), f"extract:{source}", "--exit-code"]) == 0


def test_undecided_conditions_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    source = FIXTURES / "conditions.cpp"
    assert main(["extract", str(source)]) == 0
    captured = capsys.readouterr()
    undecided = [ln for ln in captured.out.splitlines() if ln.startswith("# UNDECIDED: ")]
    warnings = [ln for ln in captured.err.splitlines() if ln.startswith("warning: ")]
    assert len(undecided) == len(warnings) == 3, f"{captured.out}\n{captured.err}"
    assert all(re.search(rf"{re.escape(str(source))}:\d+: ", w) for w in warnings), warnings


def test_unreadable_policy_is_not_observed_in_diff(capsys: pytest.CaptureFixture[str]) -> None:
    source = FIXTURES / "custom_kernel.cpp"
    assert main(["extract", str(source)]) == 0
    captured = capsys.readouterr()
    assert "# NO POLICY (under not_observed): aten::_cudnn_rnn: " in captured.out
    assert "warning: no policy for aten::_cudnn_rnn: " in captured.err
    d = diff_cmd.compute(f"extract:{source}", "cuda")
    assert [(u.op, u.side) for u in d.not_observed] == [("aten::_cudnn_rnn", "a")]
    assert "aten::_cudnn_rnn" not in {e.op for e in (*d.added, *d.removed)}


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_written_spec_keeps_unreadable_ops_not_observed(
    fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file extract writes carries the ops it could not read: diff on that file, against the
    same source's spec with those ops in it, reports them not observed, never removed."""
    source = FIXTURES / "unreadable_kernels.cpp"
    out = tmp_path / f"cpu.{fmt}"
    assert main(["extract", str(source), "--format", fmt, "-o", str(out)]) == 0
    data = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert sorted(data["not_observed"]) == ["aten::bmm", "aten::mm"], data
    assert "lambda" not in data["not_observed"]["aten::mm"] and "[](" in data["not_observed"]["aten::mm"]
    if fmt == "yaml":
        assert main(["validate", str(out)]) == 0, capsys.readouterr().err
    d = diff_cmd.compute("cpu", str(out) if fmt == "yaml" else f"extract:{source}")
    assert {u.op for u in d.not_observed} == {"aten::bmm", "aten::mm"}, d
    assert not {"aten::bmm", "aten::mm"} & {e.op for e in (*d.added, *d.removed)}, d


def test_spliced_comment_reads_as_cpp_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """A '//' comment ending in a backslash swallows the next line (C++ splices lines before it
    removes comments): that registration is not read, and stderr says so with file and line."""
    source = FIXTURES / "spliced_comment.cpp"
    assert main(["extract", str(source)]) == 0
    captured = capsys.readouterr()
    notes = [ln for ln in captured.err.splitlines() if ln.startswith("note: ")]
    assert len(notes) == 1 and notes[0].startswith(
        f"note: {source}:9: 'KERNEL_CPU(bmm, lower_precision_fp)' "
    ), f"{_repro(source, [])}\n{captured.err}"
    assert "comment on line 8" in notes[0]
    assert f"# SPLICED: {source}:9: " in captured.out
    # a reviewer's diff shows it too: the op is gone, and the side says why
    d = diff_cmd.compute("cpu", f"extract:{source}")
    assert "aten::bmm" not in {e.op for e in (*d.added, *d.changed)}
    assert any(side == "b" and note.startswith(f"SPLICED: {source}:9: ") for side, note in d.notes), d.notes


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("// a \\\nKERNEL_CPU(mm, fp32)\n", True),
        ("// a \\  \t\nKERNEL_CPU(mm, fp32)\n", True),  # whitespace after the backslash (C++23, gcc, clang)
        ("// a \\\n// b\nKERNEL_CPU(mm, fp32)\n", False),
        ("/* a \\ */\nKERNEL_CPU(mm, fp32)\n", False),
        ('"// not a comment \\\\"\nKERNEL_CPU(mm, fp32)\n', False),
    ],
)
def test_line_splicing_before_comments(text: str, hidden: bool) -> None:
    spliced: list = []
    lines = tokenize(text, "t.cpp", spliced)
    code = [t.text for line in lines for t in line.tokens]
    assert ("KERNEL_CPU" not in code) is hidden, (text, code)
    assert [sp.line for sp in spliced] == ([2] if hidden else []), (text, spliced)


def _without_mtia_block(tmp_path: Path) -> Path:
    text = (FIXTURES / "xpu_mtia_blocks.cpp").read_text(encoding="utf-8")
    start, end = text.index("// MTIA block"), text.index("// end of the MTIA block")
    pr = tmp_path / "autocast_mode.cpp"
    pr.write_text(text[:start] + text[end:], encoding="utf-8")
    return pr


def test_diff_pairs_the_device_asked_for() -> None:
    """diff mtia extract:PATH compares MTIA's block, never another device the file registers."""
    source = FIXTURES / "xpu_mtia_blocks.cpp"
    for device in ("mtia", "xpu"):
        d = diff_cmd.compute(device, f"extract:{source}")
        assert d.paired == ((device, device),) and d.identical, (
            f"autocast-spec diff {device} extract:{source}: {d}"
        )


def test_deleted_device_block_shows_every_op_removed(
    tmp_path: Path, spec: Spec, capsys: pytest.CaptureFixture[str]
) -> None:
    """A PR that deletes the MTIA block: every MTIA op is removed, the device is gone, and a CI
    gate fails (exit 1); it is never compared with the XPU block the file still holds."""
    pr = _without_mtia_block(tmp_path)
    d = diff_cmd.compute("mtia", f"extract:{pr}")
    assert d.devices_removed == ("mtia",) and not d.paired and not d.changed, d
    assert {e.op for e in d.removed} == set(spec.devices["mtia"].ops), d
    assert any(n.startswith("NOT REGISTERED: no Autocast block for mtia") for _, n in d.notes), d.notes
    assert main(["diff", "mtia", f"extract:{pr}", "--exit-code"]) == 1
    capsys.readouterr()
    assert main(["diff", f"extract:{pr}", "mtia", "--format", "json"]) == 0  # the other way round: added
    data = json.loads(capsys.readouterr().out)
    assert data["devices"] == {"added": ["mtia"], "removed": []}
    assert {e["op"] for e in data["ops"]["added"]} == set(spec.devices["mtia"].ops)
    # against a spec directory, and against the file before the PR: the device is reported removed
    from autocast_spec.files import bundled_spec_dir

    whole = diff_cmd.compute(str(bundled_spec_dir()), f"extract:{pr}")
    assert "mtia" in whole.devices_removed and "xpu" not in whole.devices_removed, whole
    before = diff_cmd.compute(f"extract:{FIXTURES / 'xpu_mtia_blocks.cpp'}", f"extract:{pr}")
    assert before.devices_removed == ("mtia",) and before.paired == (("xpu", "xpu"),), before


@pytest.mark.parametrize("vendor", ["google_torch_tpu.yaml", "sophgo_torch_tpu.yaml"])
def test_extract_side_takes_dtypes_from_the_spec_it_meets(vendor: str) -> None:
    """C++ does not state the dtype defaults: against a spec naming the device, the extract side
    takes that spec's, whichever bundled vendor file of the same device name extract alone picks."""
    from autocast_spec.files import vendor_spec_dir

    source = FIXTURES / "semicolon_macro" / "backend" / "csrc" / "amp" / "policies.cc"
    d = diff_cmd.compute(str(vendor_spec_dir() / vendor), f"extract:{source}")
    assert d.paired == (("tpu", "tpu"),), d
    assert not (d.defaults or d.supported_added or d.supported_removed), d
    assert any("the side it is compared with" in n for _, n in d.notes), d.notes


def test_privateuse1_block_is_not_an_in_tree_device(capsys: pytest.CaptureFixture[str]) -> None:
    """A PrivateUse1 block stands for a backend of its own name, never for mtia, cuda, ...
    (torch refuses to rename PrivateUse1 to a device of its own)."""
    source = FIXTURES / "privateuse1.cpp"
    assert main(["extract", str(source), "--device", "mtia"]) == 2
    assert "mtia is a device of torch's own" in capsys.readouterr().err
    d = diff_cmd.compute("mtia", f"extract:{source}")
    assert d.devices_removed == ("mtia",) and not d.paired, d


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["extract", str(FIXTURES / "two_devices.cpp")],
            "several devices: cpu (AutocastCPU), xpu (AutocastXPU)",
        ),
        (["extract", str(FIXTURES / "two_devices.cpp"), "--device", "mps"], "only for: cpu"),
        (["extract", str(FIXTURES / "no_autocast.cpp")], "no op registered on an Autocast key"),
        (["extract", str(FIXTURES / "unknown_device.cpp")], "pass --dtypes-from DEVICE"),
        (["extract", str(FIXTURES / "nothing-here.cpp")], "no such file or directory"),
        (["extract", str(FIXTURES / "privateuse1.cpp"), "-D", "=1"], "-D =1: "),
        (["diff", "cuda", "extract:"], "name the source"),
    ],
)
def test_usage_errors_are_one_line(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and words in err, f"autocast-spec {shlex.join(argv)}\n{err}"


def test_device_picks_one_of_several() -> None:
    out = _extract(FIXTURES / "two_devices.cpp", ["--device", "xpu"])
    assert (out.spec.device, [e.policy for e in out.extracted.entries.values()]) == ("xpu", [Policy.FP32])
    assert "extract: " not in to_yaml(out)


# --- the preprocessor's pieces -----------------------------------------------------------


def _expand(defines: str, text: str) -> str:
    table = MacroTable()
    for line in tokenize(defines, "d.h"):
        table.define(parse_define(line.tokens[2:]))
    ex = Expander(table)
    toks = [t for line in tokenize(text, "t.cpp") for t in line.tokens]
    out = spell(ex.expand(toks))
    assert not ex.problems, ex.problems
    return out


@pytest.mark.parametrize(
    ("defines", "text", "want"),
    [
        ("#define S(x) #x", 'S(a  +  "q")', '"a + \\"q\\""'),
        ("#define CAT(a, b) a ## b", "CAT(KERNEL_, CPU)(mm)", "KERNEL_CPU(mm)"),
        ("#define V(...) f(__VA_ARGS__, z)", "V(a, b)", "f(a, b, z)"),
        ("#define G(fmt, ...) g(fmt, ## __VA_ARGS__)", "G(x)", "g(x)"),
        ("#define N(fmt, args...) h(fmt, args)", "N(x, 1, 2)", "h(x, 1, 2)"),
        ("#define R R + 1", "R", "R + 1"),
        ("#define L(_) _(a) _(b, c)\n#define W(...) K(__VA_ARGS__, p)", "L(W)", "K(a, p) K(b, c, p)"),
        ("#define F(x) x", "F (y) F", "y F"),
        ("#define R(x) x R", "R(R)(1)", "R R(1)"),
        ("#define I(x) x", "I(I)(1)", "I(1)"),  # as gcc: the name from the argument is painted
    ],
)
def test_macro_expansion(defines: str, text: str, want: str) -> None:
    assert _expand(defines, text) == want


@pytest.mark.parametrize(
    ("expr", "want"),
    [
        ("1 && !0", True),
        ("defined(HAVE_X) || 0", True),
        ("defined(NOT_SEEN)", None),
        ("0 && defined(NOT_SEEN)", False),
        ("defined(NOT_SEEN) || 1", True),
        ("VERSION >= 0x0203", True),
        ("VERSION > 600 ? 1 : 0", False),
        ("AT_CUDNN_ENABLED()", None),
        ("TWICE(2) == 4", True),
    ],
)
def test_condition_evaluation(expr: str, want: bool | None) -> None:
    table = MacroTable()
    for d in ("HAVE_X", "VERSION 0x0204", "TWICE(n) ((n) * 2)"):
        table.define(parse_define(tokenize(d, "d.h")[0].tokens))
    assert evaluate(list(tokenize(expr, "c.h")[0].tokens), table) is want


@pytest.mark.parametrize(
    ("source", "device", "vendor"),
    [("xla_style.cpp", "xla", "torch_xla.yaml"), ("vendor_privateuse1_forms.cpp", "npu", "torch_npu.yaml")],
)
def test_vendor_device_takes_its_bundled_dtypes(source: str, device: str, vendor: str) -> None:
    """--device naming a device of a bundled vendor spec: the dtypes (default, supported, the
    unsupported-dtype rule) are that spec's, and the header says where they came from."""
    from autocast_spec.files import device_torch_ranges, vendor_spec_dir
    from autocast_spec.versions import nearest_covered_version
    from reference_impl.spectools.installed_spec import load_installed_spec

    out = _extract(FIXTURES / source, ["--device", device])
    f = vendor_spec_dir() / vendor
    # a vendor file is read for the torch release it pairs with nearest the installed one
    near = nearest_covered_version(device_torch_ranges([f]), installed_torch_version())
    want = load_installed_spec([f], torch_version=near, check_registry=False).devices[device]
    got = out.spec
    assert (got.default_dtype, got.supported_dtypes, got.unsupported_dtype) == (
        want.default_dtype,
        want.supported_dtypes,
        want.unsupported_dtype,
    ), _repro(FIXTURES / source, ["--device", device])
    assert any(f"vendors/{vendor}" in n for n in out.notes), out.notes

"""`autocast-spec matrix`: the grid is the spec; the HTML page is self-contained; bad input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from autocast_spec.model import Policy, Spec
from conformance.cli import main
from reference_impl.spectools.matrix import POLICY_COLOURS, build_matrix, to_html, to_markdown

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from render_matrix_screenshot import find_browser, screenshot


def test_every_cell_is_the_spec_policy(spec: Spec) -> None:
    m = build_matrix(spec)
    assert m.devices == tuple(spec.devices)
    assert {op for op, _ in m.rows} == {op for d in spec.devices.values() for op in d.ops}
    for op, cells in m.rows:
        for dev, cell in zip(m.devices, cells, strict=True):
            assert cell == spec.devices[dev].policy_of(op), (op, dev)


def test_markdown_has_one_row_per_op(spec: Spec) -> None:
    m = build_matrix(spec, ["cuda", "xpu"])
    lines = [ln for ln in to_markdown(m).splitlines() if ln.startswith("| `")]
    assert len(lines) == len(m.rows)


def test_html_is_self_contained_and_colour_coded(spec: Spec) -> None:
    page = to_html(build_matrix(spec))
    assert not re.search(r"""(src|href)=["']?https?:""", page), "the page must not load anything"
    assert 'id="filter"' in page and "<script>" in page
    used = {c for _, cells in build_matrix(spec).rows for c in cells if c}
    for policy in used:
        assert f"background:{POLICY_COLOURS[policy]}" in page
    assert len(set(POLICY_COLOURS.values())) == len(Policy)


def test_cli_devices_and_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--devices", "cpu,cuda", "--format", "markdown"]) == 0
    assert "| op | cpu | cuda |" in capsys.readouterr().out
    assert main(["matrix", "--format", "html"]) == 0
    assert capsys.readouterr().out.startswith("<!DOCTYPE html>")


def test_unknown_device_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "--devices", "cuda", "nosuchdevice"]) == 2
    err = capsys.readouterr().err.strip()
    assert "nosuchdevice" in err and "\n" not in err


def test_html_renders_in_headless_chromium(spec: Spec, tmp_path: Path) -> None:
    """The page loads in a real browser and its filter script runs (benchmarks/ has the screenshot)."""
    browser = find_browser()
    if browser is None:
        pytest.skip("no chromium/google-chrome on PATH (apt-get install chromium); CI may lack one")
    m = build_matrix(spec)
    page = tmp_path / "matrix.html"
    page.write_text(to_html(m).replace('type="search"', 'type="search" value="conv"'), encoding="utf-8")
    flags = ["--headless", "--no-sandbox", "--disable-gpu"]
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    ).stdout
    shown = sum(1 for op, _ in m.rows if "conv" in op)
    assert f"{shown} of {len(m.rows)} ops" in dom, "the filter script did not run in the browser"
    png = tmp_path / "matrix.png"
    screenshot(page, png, browser)
    assert png.stat().st_size > 10_000

"""A kernel that refuses its inputs natively on this host is not applicable here, in every mode.

oneDNN refuses the bfloat16 LSTM primitive on CPUs without AVX-512, so eager autocast
raises there for ``aten::mkldnn_rnn_layer`` and a declared compile divergence looks
stale. The suite's verdict must not depend on the CPU: such cases are skipped with the
reason, never failed. Here a plugin loaded with ``-p`` plants that host's behaviour
for ``aten::mm`` (its CPU kernel refuses bfloat16 inputs, with or without autocast),
and a copy of the spec declares a compile divergence for it, as spec/jit.yaml does for
``aten::mkldnn_rnn_layer``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from pathlib import Path

from helpers.suite_runs import ROOT, outcomes, run_suite, skip_reasons, summary

OP = "aten::mm"
MODES = ("script", "trace", "compile")

REFUSING = '''
"""Plant a CPU kernel for aten::mm that refuses bfloat16 inputs, as oneDNN does on some hosts."""
import torch

_LIB = torch.library.Library("aten", "IMPL")


def _mm(a, b):
    if torch.bfloat16 in (a.dtype, b.dtype):
        raise RuntimeError("could not create a primitive descriptor (planted: bfloat16 refused on this host)")
    return torch.bmm(a.unsqueeze(0), b.unsqueeze(0)).squeeze(0)


_LIB.impl("mm", _mm, "CPU")
'''

DECLARED = (
    '    - {op: "aten::mm", dtype: bfloat16, inputs: float32, observed: "float32", '
    'reason: "planted", condition: "the planted kernel accepts bfloat16", source: none, seen_on: "2.13"}\n'
)


def _run_planted(
    tmp_path: Path, plugin: str, modes: tuple[str, ...], *args: str
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The cpu suite in ``modes`` with ``plugin`` (a module's source) loaded by ``-p``; its JUnit XML."""
    (tmp_path / "planted_kernel.py").write_text(textwrap.dedent(plugin))
    xml = tmp_path / "out.xml"
    p = run_suite(
        "--backend",
        "cpu",
        *(a for m in modes for a in ("--mode", m)),
        *args,
        "-p",
        "planted_kernel",
        f"--junitxml={xml}",
        env_extra={"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    return p, xml


def test_native_refusal_is_skipped_with_the_reason_in_eager_and_every_mode(tmp_path: Path) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(ROOT / "spec", spec)
    jit = spec / "jit.yaml"
    text = jit.read_text()
    assert text.rstrip().splitlines()[-1].startswith("    - {op:"), "mode_divergences.compile ends jit.yaml"
    jit.write_text(text.rstrip("\n") + "\n" + DECLARED)
    p, xml = _run_planted(
        tmp_path,
        REFUSING,
        ("eager", *MODES),
        "--spec",
        str(spec),
        "-m",
        "op_policy or numerics or mode_check",
        "-k",
        f"{OP}] or {OP}-",
    )
    got = outcomes(xml)
    reasons = skip_reasons(xml)
    assert got, summary(p)
    bad = {k: v for k, v in got.items() if v in ("failure", "error")}
    assert not bad, f"{bad}\n{summary(p)}"
    checked = {k: v for k, v in got.items() if "test_op_policy[" in k or "test_numerics[" in k}
    checked |= {k: v for k, v in got.items() if "test_mode_matches_eager[" in k}
    for mode in MODES:
        for inputs in ("float32", "lower"):
            assert any(f"[{mode}-{OP}-bfloat16-{inputs}]" in k for k in checked), (mode, inputs, got)
    assert any("test_op_policy[" in k for k in checked) and any("test_numerics[" in k for k in checked)
    for k in checked:
        assert got[k] == "skipped", f"{k}: {got[k]}\n{summary(p)}"
        assert "not applicable on this host" in reasons[k] and "planted" in reasons[k], (k, reasons[k])
    assert p.returncode == 0, summary(p)


BROKEN_AUTOCAST = '''
"""Plant an AutocastCPU kernel for aten::mm that raises: autocast fails, the kernel itself is fine."""
import torch

_LIB = torch.library.Library("aten", "IMPL")


def _mm(a, b):
    raise RuntimeError("planted: autocast cannot handle mm")


_LIB.impl("mm", _mm, "AutocastCPU")
'''


def test_eager_autocast_failing_where_the_kernel_runs_is_a_failure_in_every_mode(tmp_path: Path) -> None:
    """The refusal is decided honestly: the raw call runs, so eager autocast itself failed."""
    p, xml = _run_planted(tmp_path, BROKEN_AUTOCAST, MODES, "-m", "mode_check", "-k", f"{OP}-")
    got = {k: v for k, v in outcomes(xml).items() if "test_mode_matches_eager[" in k}
    assert len(got) == 2 * len(MODES) and set(got.values()) == {"failure"}, f"{got}\n{summary(p)}"
    assert "eager autocast itself fails" in p.stdout, summary(p)

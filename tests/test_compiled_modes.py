"""--mode compile fails a compiler backend that drops autocast's casts (a planted pass), and
--mode aoti an AOTInductor that ignores the autocast region.

A ``-p`` plugin registers a ``torch.compile`` backend, ``dropcast``: AOTAutograd with a
forward compiler that removes every cast to a lower-precision dtype from the graph (the
kind of fusion bug that computes ``op(float32 inputs)`` where eager computes
``op(rounded inputs)``). The batched compile mode must fail the ops it breaks, per op.
Another replaces ``torch._inductor.aoti_compile_and_package`` by one that compiles the
exported program with every autocast region disabled: the package runs the ops uncast.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.suite_runs import run_planted, run_suite, summary

DROPCAST = """
import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd

LOWER = (torch.bfloat16, torch.float16)


def _drop_casts(gm, example_inputs):
    for node in list(gm.graph.nodes):
        if node.target is torch.ops.aten._to_copy.default and node.kwargs.get("dtype") in LOWER:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


register_backend(name="dropcast")(aot_autograd(fw_compiler=_drop_casts))
"""


def planted_mode_checks(
    tmp_path: Path, plugin: str, source: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The per-op mode checks (CPU, bfloat16) with ``source`` planted; the run and its outcomes."""
    p, got = run_planted(
        tmp_path, plugin, source, *("--backend", "cpu", "--dtype", "bfloat16", "-m", "mode_check"), *args
    )
    assert got, summary(p)
    return p, got


def test_a_compiler_that_drops_casts_fails_the_compile_mode(tmp_path: Path) -> None:
    p, got = planted_mode_checks(
        tmp_path,
        "planted_compiler",
        DROPCAST,
        *("--mode", "compile", "--compile-backend", "dropcast"),
        *("-k", "test_mode_matches_eager and (aten::mm- or aten::linear- or aten::relu-)"),
    )
    mm = {k: v for k, v in got.items() if "aten::mm-" in k or "aten::linear-" in k}
    assert len(mm) == 4, mm  # mm and linear, float32 and lower inputs
    # float32 inputs: the dropped cast leaves the op in float32; lower inputs need no cast
    assert all(v == "failure" for k, v in mm.items() if k.endswith("-float32]")), mm
    assert all(v == "passed" for k, v in mm.items() if k.endswith("-lower]")), mm
    assert "gives other output dtypes than eager autocast" in p.stdout, summary(p)
    # the hint names the file a compiler's divergences belong in, with the backend it holds for
    assert "add to spec/compiled.yaml mode_divergences.compile: {op: aten::mm" in p.stdout, summary(p)
    assert "backend: dropcast," in p.stdout, summary(p)


NOREGION = """
import torch
import torch._inductor

REAL = torch._inductor.aoti_compile_and_package


def ignoring_autocast(ep, *args, **kwargs):
    for node in ep.graph.nodes:  # wrap_with_autocast(device, dtype, enabled, cache, body, *inputs)
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "wrap_with_autocast":
            node.args = (*node.args[:2], False, *node.args[3:])
    ep.graph_module.recompile()
    return REAL(ep, *args, **kwargs)


torch._inductor.aoti_compile_and_package = ignoring_autocast
"""


def test_an_aoti_that_ignores_the_autocast_region_fails_the_aoti_mode(tmp_path: Path) -> None:
    p, got = planted_mode_checks(
        tmp_path,
        "planted_aoti",
        NOREGION,
        *("--mode", "aoti", "--op", "aten::mm", "-k", "test_mode_matches_eager"),
    )
    mm = {k: v for k, v in got.items() if "aoti-aten::mm-" in k}
    assert len(mm) == 2, mm  # float32 and lower inputs
    # float32 inputs: no region, no cast, the op stays float32; lower inputs need no cast
    test = "conformance.test_modes::test_mode_matches_eager[aoti-aten::mm-bfloat16-{}]"
    assert mm[test.format("float32")] == "failure", mm
    assert mm[test.format("lower")] == "passed", mm
    assert "aoti (non-strict export, AOTInductor package) gives other output dtypes" in p.stdout, summary(p)
    assert "add to spec/compiled.yaml mode_divergences.aoti: {op: aten::mm" in p.stdout, summary(p)


def test_aoti_without_a_cpp_compiler_is_a_usage_error() -> None:
    p = run_suite(
        *("--backend", "cpu", "--mode", "aoti", "--op", "aten::mm", "-m", "mode_check"),
        env_extra={"CXX": "/nonexistent/c++"},
    )
    assert p.returncode == 2, summary(p)
    line = "usage error: --mode aoti: AOTInductor needs a C++ compiler (set CXX)"
    assert line in p.stdout + p.stderr, summary(p)
    assert "Traceback" not in p.stdout + p.stderr, summary(p)

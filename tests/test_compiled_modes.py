"""--mode compile fails a compiler backend that drops autocast's casts (a planted pass).

A ``-p`` plugin registers a ``torch.compile`` backend, ``dropcast``: AOTAutograd with a
forward compiler that removes every cast to a lower-precision dtype from the graph (the
kind of fusion bug that computes ``op(float32 inputs)`` where eager computes
``op(rounded inputs)``). The batched compile mode must fail the ops it breaks, per op.
"""

from __future__ import annotations

from pathlib import Path

from helpers.suite_runs import run_planted, summary

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


def test_a_compiler_that_drops_casts_fails_the_compile_mode(tmp_path: Path) -> None:
    p, got = run_planted(
        tmp_path,
        "planted_compiler",
        DROPCAST,
        *("--backend", "cpu", "--dtype", "bfloat16", "--mode", "compile", "--compile-backend", "dropcast"),
        *("-m", "mode_check"),
        *("-k", "test_mode_matches_eager and (aten::mm- or aten::linear- or aten::relu-)"),
    )
    assert got, summary(p)
    mm = {k: v for k, v in got.items() if "aten::mm-" in k or "aten::linear-" in k}
    assert len(mm) == 4, mm  # mm and linear, float32 and lower inputs
    # float32 inputs: the dropped cast leaves the op in float32; lower inputs need no cast
    assert all(v == "failure" for k, v in mm.items() if k.endswith("-float32]")), mm
    assert all(v == "passed" for k, v in mm.items() if k.endswith("-lower]")), mm
    assert "gives other output dtypes than eager autocast" in p.stdout, summary(p)

"""The export and compile scenarios of spec/jit.yaml fail when the behaviour they name breaks.

Each test plants one deviation with a ``-p`` plugin and runs its scenario
(``conformance/test_jit_limitations.py``): the scenario's test must fail with the observation the
deviation gives, and the same selection passes without it.

* ``export-under-ambient-autocast``: an export that bakes the ambient region's casts in;
* ``export-decomposed-under-ambient-autocast``: a ``run_decompositions()`` that ignores the
  ambient region (the spec records that torch bakes it in: a change of behaviour fails too);
* ``export-nested-disabled-region``: exported programs whose nested ``enabled=False`` region
  runs with the outer region's state;
* ``export-decorated-forward``: an ``@torch.autocast`` decorator that does nothing while exporting;
* ``compile-nested-regions``: a compiler backend that leaves a bias uncast in a region
  (pytorch#121631, "invalid dtype for bias"), chosen with ``--compile-backend``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.suite_runs import run_planted, run_suite, summary

JIT = ("conformance/test_jit_limitations.py",)
TEST = "conformance.test_jit_limitations::test_limitation[{}]"

BAKES_AMBIENT = """
import torch
import torch.export

REAL = torch.export.export


def baking(*args, **kwargs):
    ep = REAL(*args, **kwargs)
    return ep.run_decompositions() if torch.is_autocast_enabled("cpu") else ep


torch.export.export = baking
"""

DECOMPOSES_WITHOUT_AMBIENT = """
import torch
import torch.export

REAL = torch.export.ExportedProgram.run_decompositions


def isolated(self, *args, **kwargs):
    with torch.autocast("cpu", enabled=False):
        return REAL(self, *args, **kwargs)


torch.export.ExportedProgram.run_decompositions = isolated
"""

NESTED_KEEPS_OUTER = """
import torch
import torch.export

REAL = torch.export.export


def keeping_outer(*args, **kwargs):
    ep = REAL(*args, **kwargs)
    for m in ep.graph_module.modules():  # submodules: the bodies of the regions
        if isinstance(m, torch.fx.GraphModule) and m is not ep.graph_module:
            for n in m.graph.nodes:  # wrap_with_autocast(device, dtype, enabled, cache, body, *inputs)
                if getattr(n.target, "__name__", "") == "wrap_with_autocast" and n.args[2] is False:
                    n.args = (*n.args[:2], True, *n.args[3:])
            m.recompile()
    return ep


torch.export.export = keeping_outer
"""

DECORATOR_IGNORED_WHILE_EXPORTING = """
import functools

import torch

REAL = torch.autocast.__call__


def decorate(self, func):
    wrapped = REAL(self, func)

    @functools.wraps(func)
    def either(*args, **kwargs):
        return func(*args, **kwargs) if torch.compiler.is_exporting() else wrapped(*args, **kwargs)

    return either


torch.autocast.__call__ = decorate
"""

BIAS_UNCAST = """
import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd

LOWER = (torch.bfloat16, torch.float16)


def _bias_uncast(gm, example_inputs):
    for node in list(gm.graph.nodes):
        cast = node.target is torch.ops.aten._to_copy.default and node.kwargs.get("dtype") in LOWER
        if cast and node.args[0].meta["val"].dim() == 1:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


register_backend(name="biasuncast")(aot_autograd(fw_compiler=_bias_uncast))
"""

# scenario -> (plugin source, extra options, what the failure says)
PLANTS = {
    "export-under-ambient-autocast": (
        BAKES_AMBIENT,
        (),
        "expect 'works', observed 'differs' '' (aten::mm → bfloat16, aten::mm → bfloat16)",
    ),
    "export-decomposed-under-ambient-autocast": (
        DECOMPOSES_WITHOUT_AMBIENT,
        (),
        "expect 'differs', observed 'works'",
    ),
    "export-nested-disabled-region": (
        NESTED_KEEPS_OUTER,
        (),
        "expect 'works', observed 'differs' '' (aten::mm → bfloat16, aten::mm → bfloat16, aten::mm → "
        "bfloat16, aten::mm → bfloat16)",
    ),
    "export-decorated-forward": (DECORATOR_IGNORED_WHILE_EXPORTING, (), "expect 'works', observed 'ignored'"),
    "compile-nested-regions": (
        BIAS_UNCAST,
        ("--compile-backend", "biasuncast"),
        "expect 'works', observed 'error' 'self and mat2 must have the same dtype",
    ),
}


def test_the_scenarios_pass_unplanted() -> None:
    p = run_suite("--backend", "cpu", "-k", " or ".join(PLANTS), paths=JIT)
    assert p.returncode == 0 and f"{len(PLANTS)} passed" in p.stdout, summary(p)


@pytest.mark.parametrize("scenario", PLANTS)
def test_a_planted_break_fails_the_scenario(tmp_path: Path, scenario: str) -> None:
    source, options, says = PLANTS[scenario]
    p, got = run_planted(
        tmp_path, "planted_scenario", source, "--backend", "cpu", *options, "-k", scenario, paths=JIT
    )
    # a compile backend other than aot_eager is named in the test id (docs/migration.md)
    backend = dict(zip(options[::2], options[1::2], strict=True)).get("--compile-backend")
    test_id = f"{scenario}-{backend}" if backend else scenario
    assert got.get(TEST.format(test_id)) == "failure", (got, summary(p))
    assert says in p.stdout, summary(p)


def test_nested_regions_with_a_bias_pass_under_inductor() -> None:
    """The scenario of pytorch#121631 ("invalid dtype for bias" under inductor) with inductor."""
    options = ("--backend", "cpu", "--compile-backend", "inductor")
    p = run_suite(*options, "-k", "compile-nested-regions", paths=JIT)
    assert p.returncode == 0 and "1 passed" in p.stdout, summary(p)

"""A batch of op calls exported with ``torch.export`` inside an autocast region, and run.

A batch's function (:mod:`.batch`) is exported strictly (Dynamo) or non-strictly (Python
tracing). Per op of the batch, the runner records

* whether the program keeps the region as the autocast higher-order op
  (``wrap_with_autocast``) with the region's arguments: each of the op's outputs is an
  output of such a node for the device and dtype under test, autocast enabled;
* what ``ep.module()`` gives (the HOP re-enters autocast at run time);
* what ``ep.run_decompositions()`` gives, and whether any HOP is left in it (the region
  becomes explicit casts: none may be).

The suite's ``modes`` category judges ``ep.module()`` in its default pass and the decomposed
program in its ``decomposed`` pass, both for strict and non-strict export.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from .batch import Runner
from .run import Region

KINDS: tuple[str, ...] = ("strict", "non-strict")
HOP_NAME = "wrap_with_autocast"


@dataclass(frozen=True)
class Exported:
    """One op's share of an exported batch."""

    region: str  # "ok", or what is wrong with the region holding the op's outputs
    module_out: Any  # ep.module()'s result for the op
    decomposed_out: Any  # the decomposed program's result
    hops_left: int  # HOP nodes left after run_decompositions() (the whole program's)


def is_hop(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and getattr(node.target, "__name__", "") == HOP_NAME


def hop_count(gm: torch.fx.GraphModule) -> int:
    """HOP nodes in ``gm`` and its submodules."""
    return sum(
        1 for m in gm.modules() if isinstance(m, torch.fx.GraphModule) for n in m.graph.nodes if is_hop(n)
    )


def region_of(node: Any, device: str, dtype: torch.dtype) -> str:
    """``ok`` when ``node`` is an output of an autocast HOP for ``device`` and ``dtype``, enabled."""
    if not isinstance(node, torch.fx.Node):
        return "ok"  # a constant output: nothing was computed
    hop = node.args[0] if node.target is operator.getitem else node
    if not isinstance(hop, torch.fx.Node) or not is_hop(hop):
        return f"output {node.name} is computed outside any {HOP_NAME} region"
    device_type, hop_dtype, enabled = hop.args[:3]
    if (device_type, hop_dtype, enabled) != (device, dtype, True):
        return f"{HOP_NAME}{tuple(hop.args[:4])} instead of ({device!r}, {dtype}, True, ...)"
    return "ok"


def export_runner(strict: bool, device: str, dtype: torch.dtype) -> Runner:
    """Export a batch's function (``strict`` or not) and run the program and its decomposition."""

    def run(fn: Callable[..., Any], tensors: list[torch.Tensor]) -> Sequence[Exported]:
        ep = torch.export.export(Region(fn), tuple(tensors), strict=strict)
        module_out = ep.module()(*tensors)
        decomposed = ep.run_decompositions()
        decomposed_out = decomposed.module()(*tensors)
        left = hop_count(decomposed.graph_module)
        output = next(n for n in reversed(ep.graph.nodes) if n.op == "output")
        outputs = list(output.args[0])
        shares = []
        for result, dec in zip(module_out, decomposed_out, strict=True):
            n = len(pytree.tree_leaves(result))
            mine, outputs = outputs[:n], outputs[n:]
            regions = [r for r in (region_of(o, device, dtype) for o in mine) if r != "ok"]
            shares.append(Exported(regions[0] if regions else "ok", result, dec, left))
        return shares

    return run

"""``--mode export``: every catalogued op exported with ``torch.export`` inside an autocast region.

One program per dtype and input kind holds every op (a batch, :mod:`.batch`), exported
strictly (Dynamo) and non-strictly (Python tracing). Per op and export kind it records

* whether the program keeps the region as the autocast higher-order op
  (``wrap_with_autocast``) with the region's arguments: each of the op's outputs is an
  output of such a node for the device and dtype under test, autocast enabled;
* what ``ep.module()`` gives (the HOP re-enters autocast at run time);
* what ``ep.run_decompositions()`` gives, and whether any HOP is left in it (the region
  becomes explicit casts: none may be).

The passes (``ModeCase.config``): ``default`` judges ``ep.module()``, ``decomposed`` the
decomposed program; both judge strict and non-strict export.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from reference_impl.engine.dtypes import dtype_of

from ..kit.case import Case
from ..kit.verdict import Observation
from ..target import Target
from .batch import Call, Runner, batch_outcomes
from .ops import MATCHES_EAGER, ModeCase, batch_calls, eager_result, inputs_of, judge, reproduction
from .run import Region

KINDS: tuple[str, ...] = ("strict", "non-strict")
DECOMPOSED = "decomposed"
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


def share(target: Target, mc: ModeCase, kind: str) -> Any:
    """The op's :class:`Exported` share of its batch exported as ``kind`` (or the error of the
    smallest batch holding it that failed to export)."""
    dtype = dtype_of(mc.dtype)
    key = ("export", kind, target.device, mc.dtype, mc.inputs)
    calls: Callable[[], Sequence[Call]] = lambda: batch_calls(target, mc, kind)  # noqa: E731
    outcomes = batch_outcomes(
        key, calls, target.device, dtype, export_runner(kind == "strict", target.device, dtype)
    )
    if mc.op in outcomes:
        return outcomes[mc.op]
    # an op that joined no batch (declared to fail export) is exported alone: a declaration
    # that no longer holds must show
    alone: Callable[[], Sequence[Call]] = lambda: [Call(mc.op, lambda: inputs_of(target, mc))]  # noqa: E731
    runner = export_runner(kind == "strict", target.device, dtype)
    return batch_outcomes((*key, mc.op), alone, target.device, dtype, runner)[mc.op]


def matches_eager(target: Target, mc: ModeCase) -> list[Observation]:
    """Per export kind: the region kept as the HOP (``default``) or gone (``decomposed``), then
    the program's output dtypes and values against eager autocast."""
    eager = eager_result(target, mc, KINDS[0])
    if isinstance(eager, Observation):
        return [eager]
    seen = []
    case = Case("jit", target.device, mc.dtype, op=mc.op, entry=mc.op)
    for kind in KINDS:
        got = share(target, mc, kind)
        where = f"{kind} export" + (", run_decompositions()" if mc.config == DECOMPOSED else ", ep.module()")
        if isinstance(got, Exported):
            if mc.config == DECOMPOSED:
                region = (
                    "no HOP left",
                    "no HOP left" if not got.hops_left else f"{got.hops_left} {HOP_NAME} left",
                )
            else:
                region = ("ok", got.region)
            seen.append(
                Observation(
                    case,
                    MATCHES_EAGER,
                    f"{where}: the autocast region as the {HOP_NAME} higher-order op",
                    *region,
                    reproduce=reproduction(target, mc, kind),
                )
            )
            got = got.decomposed_out if mc.config == DECOMPOSED else got.module_out
        seen.append(judge(target, mc, kind, eager, got, where))
    return seen

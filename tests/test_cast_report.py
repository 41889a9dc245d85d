"""The cast report of ``trace_casts(model)``: by module and by op, what was cast, bytes, cache.

A two-layer net whose casts are known from its shapes (a raw input, weights, an
activation the net makes float32 again), then the six Hugging Face models of the
benchmarks (skipped without ``transformers``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from helpers.hf_helpers import HF_MODELS, hf_models
from torch import nn

import reference_impl
from reference_impl.kernels.cast_report import VERSION
from reference_impl.kernels.trace import CastLog

LOWER = torch.bfloat16


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 16)
        self.second = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x).float())  # .float(): the second linear casts an activation


def traced(steps: int = 2, cache: bool = True) -> tuple[Net, torch.Tensor, CastLog]:
    torch.manual_seed(0)
    net, x = Net(), torch.randn(3, 8)
    with (
        reference_impl.trace_casts(net) as log,
        reference_impl.autocast("cpu", dtype=LOWER, cache_enabled=cache),
    ):
        for _ in range(steps):
            net(x)
    return net, x, log


def nbytes(*ts: torch.Tensor) -> int:
    return sum(t.numel() * LOWER.itemsize for t in ts)


def repro(what: str) -> str:
    return f"{what}\nreproduce: pytest tests/test_cast_report.py -k {what.split(':')[0]}"


def test_records_name_module_kind_and_size() -> None:
    net, x, log = traced(steps=2)
    got = [(r.module, r.arg, r.kind, r.nbytes, r.stored, r.cached) for r in log]
    hidden = torch.empty(3, 16)
    first_step = [
        ("first", "input", "input", nbytes(x), False, False),
        ("first", "weight", "weight", nbytes(net.first.weight), True, False),
        ("first", "bias", "weight", nbytes(net.first.bias), True, False),
        ("second", "input", "activation", nbytes(hidden), False, False),
        ("second", "weight", "weight", nbytes(net.second.weight), True, False),
        ("second", "bias", "weight", nbytes(net.second.bias), True, False),
    ]
    # The second step: inputs cast again, weights served from the cache (no copy, no bytes).
    second_step = [
        (m, a, k, 0, False, True) if k == "weight" else (m, a, k, n, s, c) for m, a, k, n, s, c in first_step
    ]
    assert got == first_step + second_step, repro(f"records: {got}\n{log}")


def test_report_sums_by_module_op_and_cache() -> None:
    net, x, log = traced(steps=2)
    report = log.report().as_dict()
    weights = [net.first.weight, net.first.bias, net.second.weight, net.second.bias]
    inputs = nbytes(x) + nbytes(torch.empty(3, 16))
    assert report["cache"] == {"stored": 4, "stored_bytes": nbytes(*weights), "hits": 4}, repro(
        f"cache: {report}"
    )
    t = report["totals"]
    assert (t["casts"], t["cache_hits"], t["bytes"]) == (8, 4, nbytes(*weights) + 2 * inputs), repro(
        f"totals: {t}"
    )
    assert t["kinds"] == {"input": 2, "weight": 8, "activation": 2}, repro(f"kinds: {t}")
    assert t["conversions"] == {"float32->bfloat16": 12}, repro(f"conversions: {t}")
    modules = {m["module"]: (m["casts"], m["cache_hits"]) for m in report["by_module"]}
    assert modules == {"first": (4, 2), "second": (4, 2)}, repro(f"modules: {modules}")
    assert [o["op"] for o in report["by_op"]] == ["aten::linear"]
    args = {(a["arg"], a["kind"]): (a["casts"], a["cache_hits"]) for a in report["by_op"][0]["args"]}
    assert args == {
        ("input", "input"): (2, 0),
        ("weight", "weight"): (2, 2),
        ("bias", "weight"): (2, 2),
        ("input", "activation"): (2, 0),
    }, repro(f"args: {args}")


def test_cache_off_stores_nothing() -> None:
    _, _, log = traced(steps=2, cache=False)
    report = log.report().as_dict()
    assert report["cache"] == {"stored": 0, "stored_bytes": 0, "hits": 0}, repro(f"cache: {report['cache']}")
    assert report["totals"]["casts"] == 12


STATS = {"casts", "cache_hits", "bytes", "dtype_args", "kinds", "conversions"}


def test_json_shape_is_stable() -> None:
    """The documented shape (docs/reference.md, version 1): keys, nesting, value types."""
    report = json.loads(traced()[2].report().to_json())
    assert report["version"] == VERSION == 1
    assert set(report) == {"version", "totals", "cache", "by_module", "by_op"}
    assert set(report["totals"]) == STATS and set(report["totals"]["kinds"]) == {
        "input",
        "weight",
        "activation",
    }
    assert set(report["cache"]) == {"stored", "stored_bytes", "hits"}
    for m in report["by_module"]:
        assert set(m) == {"module", *STATS} and (m["module"] is None or isinstance(m["module"], str))
    for o in report["by_op"]:
        assert set(o) == {"op", "policy", *STATS, "args"}
        assert all(set(a) == {"arg", "kind", *STATS} for a in o["args"])


def test_table_answers_what_when_and_the_cache() -> None:
    text = str(traced()[2].report())
    for needle in ("8 casts made", "served from the weight cache", "2 inputs, 8 weights, 2 activations"):
        assert needle in text, repro(f"table: {needle!r} missing:\n{text}")
    for needle in ("by module:", "first", "second", "by op and argument:", "aten::linear"):
        assert needle in text, repro(f"table: {needle!r} missing:\n{text}")


def test_hooks_removed_after_the_block_and_after_an_exception() -> None:
    net, x, _ = traced()
    hooks = [(m._forward_hooks, m._forward_pre_hooks) for m in net.modules()]
    assert all(not h and not p for h, p in hooks)
    with pytest.raises(ZeroDivisionError), reference_impl.trace_casts(net), reference_impl.autocast("cpu"):
        net(x)
        _ = 1 / 0
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in net.modules())
    with reference_impl.trace_casts() as log, reference_impl.autocast("cpu"):
        net(x)
    assert {r.module for r in log} == {None}  # no model given: no module names, none left over


@pytest.mark.parametrize("name", HF_MODELS)
def test_report_on_hugging_face_models(name: str) -> None:
    hf = hf_models()
    model, inputs = hf.build(name)
    with reference_impl.trace_casts(model) as log, reference_impl.autocast("cpu", dtype=LOWER):
        for _ in range(2):
            model(**inputs)
    report: dict[str, Any] = log.report().as_dict()
    names = {n for n, _ in model.named_modules()}
    assert report["totals"]["casts"] > 0 and report["cache"]["hits"] > 0, repro(f"{name}: {report['totals']}")
    assert {m["module"] for m in report["by_module"]} <= names | {None}, repro(f"{name}: unknown modules")
    weights = [r for r in log if r.kind == "weight"]
    assert weights and all(r.module is not None for r in weights), repro(
        f"{name}: weight casts outside modules"
    )
    assert str(log.report()).count("\n") > 5

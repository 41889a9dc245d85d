"""spec/jit.yaml: loads, every limitation has a scenario (and back), list shows it, tables agree."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from autocast_spec.model import Divergence, Spec
from conformance import jit_scenarios, mode_run, mode_verdict
from reference_impl.cli.list_cmd import device_listing
from reference_impl.cli.readme_tables import END, START, extract_block, jit_block

ROOT = Path(__file__).resolve().parent.parent


def test_every_limitation_has_a_scenario_and_back(spec: Spec) -> None:
    ids = {lim.id for lim in spec.limitations}
    assert ids == set(jit_scenarios.scenario_ids()), (
        f"no scenario: {sorted(ids - set(jit_scenarios.scenario_ids()))}; "
        f"no spec entry: {sorted(set(jit_scenarios.scenario_ids()) - ids)}"
    )


def test_seed_limitations_are_covered(spec: Spec) -> None:
    """The limitations of seed 000 and the trace+freeze path of seed 003 each have an entry."""
    needed = {
        "script-decorator-on-callee",
        "script-decorated-scripted-function",
        "script-nonconstant-enabled",
        "script-with-autocast-as",
        "script-promote-conservative",
        "script-missing-fp32-append-dtype",
        "script-calls-traced-autocast-false",
        "trace-calls-scripted-under-autocast",
        "trace-freeze-cpu",
    }
    assert needed <= {lim.id for lim in spec.limitations}


def test_list_json_has_jit_limitations(spec: Spec) -> None:
    listing = json.loads(json.dumps(device_listing(spec, "cpu")))
    got = {(e["id"], e["mode"], e["expect"]) for e in listing["jit_limitations"]}
    assert ("trace-freeze-cpu", "trace", "error") in got
    assert all(set(e) == {"id", "mode", "expect"} for e in listing["jit_limitations"])
    cuda_ids = {e["id"] for e in device_listing(spec, "cuda")["jit_limitations"]}
    assert "trace-freeze-cpu" not in cuda_ids  # devices: [cpu]
    assert "script-promote-conservative" in cuda_ids


def test_generated_table_matches_readme_or_docs(spec: Spec) -> None:
    """README holds the block once the lead pasted it; until then docs/jit.md must."""
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    where = readme
    if START not in text:
        where = ROOT / "docs" / "jit.md"
        text = where.read_text(encoding="utf-8")
    block = extract_block(text)
    assert block is not None, f"{where}: no {START} ... {END} block"
    assert block == jit_block(spec), (
        f"{where}: the JIT table is out of date; regenerate with "
        "'python -m reference_impl.cli.readme_tables' and paste it between the markers"
    )


DECL = Divergence("aten::mm", "bfloat16", "float32", "test", "float32")


@pytest.mark.parametrize(
    ("eager", "observed", "declared", "status"),
    [
        ("bfloat16", "bfloat16", None, "same"),
        ("bfloat16", "float32", None, "undeclared"),
        ("bfloat16", "float32", DECL, "declared"),
        ("bfloat16", "error", DECL, "undeclared"),
        ("bfloat16", "bfloat16", DECL, "stale"),
    ],
)
def test_judge(eager: str, observed: str, declared: Divergence | None, status: str) -> None:
    verdict = mode_verdict.judge("script", "aten::mm", "bfloat16", "float32", eager, observed, declared)
    assert verdict.status == status, verdict.detail


@pytest.mark.parametrize(("observed", "status"), [("float32", "declared"), ("error", "undeclared")])
def test_judge_shows_the_condition_a_divergence_depends_on(observed: str, status: str) -> None:
    declared = replace(DECL, condition="the host CPU has AVX-512")
    verdict = mode_verdict.judge("compile", "aten::mm", "bfloat16", "float32", "bfloat16", observed, declared)
    assert verdict.status == status and "condition: the host CPU has AVX-512" in verdict.detail, verdict
    stale = mode_verdict.judge("compile", "aten::mm", "bfloat16", "float32", "error", "error", declared)
    assert stale.status == "stale" and "the host CPU has AVX-512" in stale.detail, stale
    assert (
        "condition"
        not in mode_verdict.judge("compile", "aten::mm", "bfloat16", "float32", "b", "f", DECL).detail
    )


def test_declared_conditions_load(spec: Spec) -> None:
    """spec/jit.yaml's optional ``condition`` reaches the model (the schema admits it)."""
    conditions = [d.condition for m in spec.mode_divergences.values() for d in m.divergences if d.condition]
    assert conditions and all(isinstance(c, str) and c.strip() for c in conditions)


def test_classify_outcomes() -> None:
    c = jit_scenarios.classify
    assert c({"x": "bfloat16"}, {"x": "bfloat16"}, {"x": "float32"}).outcome == "works"
    assert c({"x": "float32"}, {"x": "bfloat16"}, {"x": "float32"}).outcome == "ignored"
    d = c(
        {"x": "float32", "y": "bfloat16"},
        {"x": "bfloat16", "y": "bfloat16"},
        {"x": "float32", "y": "float32"},
    )
    assert d.outcome == "differs" and d.differs == (("x", "float32"),)


def test_script_source_renders_constants() -> None:
    src = mode_run.script_source(
        "aten::sum.dim_IntList",
        (mode_run.Slot((0,), False), [0], False),
        {"dtype": torch.float32},
        1,
        "cpu",
        torch.bfloat16,
    )
    assert "torch.ops.aten.sum(t0, [0], False, dtype=torch.float32)" in src
    assert "torch.autocast(device_type='cpu', dtype=torch.bfloat16)" in src

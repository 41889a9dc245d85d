"""spec/jit.yaml: loads, every limitation has a scenario (and back), list shows it, tables agree."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from autocast_spec.common import frozen_map
from autocast_spec.model import Divergence, OpPolicy, Policy, Spec
from conformance.categories import modes
from conformance.kit import scenarios
from conformance.kit.case import Case
from conformance.kit.divergences import Run, declaration
from conformance.kit.scenarios import core as jit_core
from conformance.kit.verdict import Observation, expect
from reference_impl.cli.jit_tables import END, START, extract_block, jit_block
from reference_impl.cli.list_cmd import device_listing
from reference_impl.modes import run as mode_run
from reference_impl.modes.batch import Config
from reference_impl.modes.run import Mode

ROOT = Path(__file__).resolve().parent.parent


def test_every_limitation_has_a_scenario_and_back(spec: Spec) -> None:
    ids = {lim.id for lim in spec.limitations}
    assert ids == set(scenarios.scenario_ids()), (
        f"no scenario: {sorted(ids - set(scenarios.scenario_ids()))}; "
        f"no spec entry: {sorted(set(scenarios.scenario_ids()) - ids)}"
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


def test_generated_table_matches_the_docs(spec: Spec) -> None:
    where = ROOT / "docs" / "jit.md"
    block = extract_block(where.read_text(encoding="utf-8"))
    assert block is not None, f"{where}: no {START} ... {END} block"
    assert block == jit_block(spec), (
        f"{where}: the JIT table is out of date; regenerate with "
        "'python -m reference_impl.cli.jit_tables' and paste it between the markers"
    )


DECL = Divergence("aten::mm", "bfloat16", "float32", "test", "float32")
MC = Run(Mode.SCRIPT, "aot_eager", Config.DEFAULT, torch.bfloat16, "aten::mm", torch.float32)


def _verdict(
    spec: Spec, eager: str, observed: str, declared: Divergence | None, mc: Run = MC
) -> tuple[str, str]:
    """What :func:`expect` makes of a mode's label against eager's: pass, xfail or fail, and why."""
    seen = Observation(
        Case("modes", "cpu", mc.dtype, op=mc.op),
        modes.MATCHES_EAGER,
        "differs",
        eager,
        observed,
        declared=declaration(mc, declared),
    )
    try:
        expect(SimpleNamespace(device="cpu", spec=spec, device_spec=spec.devices["cpu"]), seen)  # type: ignore[arg-type]
    except pytest.xfail.Exception as e:  # a subclass of pytest.fail.Exception: first
        return "xfail", str(e)
    except pytest.fail.Exception as e:
        return "fail", str(e)
    return "pass", ""


@pytest.mark.parametrize(
    ("eager", "observed", "declared", "status"),
    [
        ("bfloat16", "bfloat16", None, "pass"),
        ("bfloat16", "float32", None, "fail"),
        ("bfloat16", "float32", DECL, "xfail"),
        ("bfloat16", "error", DECL, "fail"),
        ("bfloat16", "bfloat16", DECL, "fail"),  # a stale declaration
    ],
)
def test_a_mode_result_against_eager(
    spec: Spec, eager: str, observed: str, declared: Divergence | None, status: str
) -> None:
    verdict, why = _verdict(spec, eager, observed, declared)
    assert verdict == status, why
    if declared is not None and eager == observed:
        assert "no longer applies" in why, why


@pytest.mark.parametrize(("observed", "status"), [("float32", "xfail"), ("error", "fail")])
def test_the_verdict_shows_the_condition_a_divergence_depends_on(
    spec: Spec, observed: str, status: str
) -> None:
    declared = replace(DECL, condition="the host CPU has AVX-512")
    mc = replace(MC, mode=Mode.COMPILE)
    verdict, why = _verdict(spec, "bfloat16", observed, declared, mc)
    assert verdict == status and "the host CPU has AVX-512" in why, why
    stale, why = _verdict(spec, "error", "error", declared, mc)
    assert stale == "fail" and "the host CPU has AVX-512" in why, why
    assert "condition" not in _verdict(spec, "b", "f", DECL, mc)[1]


def test_declared_conditions_load(spec: Spec) -> None:
    """spec/jit.yaml's optional ``condition`` reaches the model (the schema admits it)."""
    conditions = [d.condition for m in spec.mode_divergences.values() for d in m.divergences if d.condition]
    assert conditions and all(isinstance(c, str) and c.strip() for c in conditions)


def test_classify_outcomes() -> None:
    c = jit_core.classify
    assert c((("x", "bfloat16"),), (("x", "bfloat16"),), (("x", "float32"),)).outcome == "works"
    assert c((("x", "float32"),), (("x", "bfloat16"),), (("x", "float32"),)).outcome == "ignored"
    d = c(
        (("x", "float32"), ("x", "bfloat16")),
        (("x", "bfloat16"), ("x", "bfloat16")),
        (("x", "float32"), ("x", "float32")),
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


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (Policy.LOWER_PRECISION_FP, "bfloat16"),
        (Policy.FP32, "float32"),
        (Policy.FP32_SET_OPT_DTYPE, "float32"),
        (Policy.FP32_APPEND_DTYPE, "float32"),
        (Policy.PROMOTE, "float16"),
        (Policy.BANNED, "error"),
        (None, "float16"),
    ],
)
def test_policy_dtype(policy: Policy | None, expected: str) -> None:
    assert jit_core.policy_dtype(policy, "float16", "bfloat16") == expected


def _setting(spec: Spec, lim_id: str) -> jit_core.Setting:
    return jit_core.Setting(next(lim for lim in spec.limitations if lim.id == lim_id), spec)


def _with_cpu_policy(spec: Spec, op: str, policy: Policy) -> Spec:
    cpu = spec.device("cpu")
    ops = dict(cpu.ops)
    ops[op] = OpPolicy(op, policy, ops[op].loc)
    return replace(spec, devices=frozen_map({**spec.devices, "cpu": replace(cpu, ops=frozen_map(ops))}))


def test_dropped_region_baseline_follows_the_cpu_policy(spec: Spec) -> None:
    """Under an outer autocast, an observed op's baseline is its cpu policy's dtype: change
    the policy in the spec and the baseline follows."""
    ctx = _setting(spec, "script-autocast-false-under-eager-autocast")
    (op,) = ctx.ops
    assert ctx.under_outer_autocast(torch.float32) == ((op, "bfloat16"),)
    changed = _setting(_with_cpu_policy(spec, op, Policy.FP32), ctx.limitation.id)
    assert changed.under_outer_autocast(torch.float32) == ((op, "float32"),)
    assert ctx.without_region(torch.float32) == ((op, "float32"),)


def test_outputs_are_labelled_by_observes(spec: Spec) -> None:
    ctx = _setting(spec, "script-region-basic")
    x = torch.ones(2, dtype=torch.bfloat16)
    assert ctx.outputs((x, x.float())) == tuple(zip(ctx.ops, ("bfloat16", "float32"), strict=True))
    with pytest.raises(jit_core.ScenarioBug, match="observes lists 2 ops"):
        ctx.outputs(x)


def test_scenario_without_observes_cannot_label(spec: Spec) -> None:
    lim = next(lim for lim in spec.limitations if lim.id == "script-region-basic")
    ctx = jit_core.Setting(replace(lim, observes=()), spec)
    with pytest.raises(jit_core.ScenarioBug, match="names no ops"):
        ctx.outputs(torch.ones(2))


def test_unused_observes_fail(spec: Spec) -> None:
    """An entry listing ops its scenario never reports does not fit: run() says so."""
    lims = tuple(
        replace(lim, observes=("aten::mm",)) if lim.id == "script-decorator-on-callee" else lim
        for lim in spec.limitations
    )
    with pytest.raises(jit_core.ScenarioBug, match="reports no op outputs"):
        scenarios.run("script-decorator-on-callee", replace(spec, limitations=lims))

"""Each limitation in spec/jit.yaml, reproduced by its scenario and checked against the entry.

An entry without a scenario, or a scenario without an entry, fails (never skips); so does a
scenario that does not fit its entry (outputs against ``observes``).
Scenarios run on CPU autocast (bfloat16), which every torch build has.
"""

from __future__ import annotations

import pytest

from autocast_spec.model import JitLimitation, Spec
from conformance import jit_scenarios
from conformance.jit_core import SCENARIOS, ScenarioBug, ScenarioOutcome, eager_autocast
from conformance.plugin import target_of
from conformance.target import Target

pytestmark = pytest.mark.jit


def _entries(spec: Spec) -> dict[str, JitLimitation]:
    return {lim.id: lim for lim in spec.limitations}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "lim_id" in metafunc.fixturenames:
        spec = target_of(metafunc.config).spec
        metafunc.parametrize("lim_id", sorted(set(_entries(spec)) | set(jit_scenarios.scenario_ids())))


def _repro(lim_id: str) -> str:
    return f"reproduce: python -c \"from conformance import jit_scenarios as j; print(j.run('{lim_id}'))\""


def mismatch(lim: JitLimitation, obs: ScenarioOutcome) -> list[str]:
    """Everything where the observation disagrees with the entry (empty: agreement)."""
    out = []
    if obs.outcome != lim.expect:
        out.append(f"expect {lim.expect!r}, observed {obs.outcome!r} {obs.message!r}")
    if lim.expect == "error" and obs.outcome == "error" and lim.message and lim.message not in obs.message:
        out.append(f"error message: expected to contain {lim.message!r}, got {obs.message!r}")
    unobserved = sorted({d.op for d in lim.differs} - set(lim.observes))
    if lim.observes and unobserved:
        out.append(f"differs names {unobserved}, which observes {list(lim.observes)} does not list")
    if lim.expect == "differs":
        declared = {(d.op, d.observed) for d in lim.differs}
        if declared != obs.differs_set():
            out.append(
                f"differs: declared {sorted(declared)}, observed {sorted(obs.differs_set())} "
                f"(undeclared {sorted(obs.differs_set() - declared)}, "
                f"not observed {sorted(declared - obs.differs_set())})"
            )
    if lim.later_calls != obs.later_calls:
        out.append(f"later_calls: declared {lim.later_calls!r}, observed {obs.later_calls!r}")
    return out


def test_limitation(lim_id: str, target: Target) -> None:
    entry = _entries(target.spec).get(lim_id)
    if entry is None:
        pytest.fail(
            f"scenario {lim_id!r} (conformance/jit_script.py, jit_trace.py, jit_compile.py) has no entry "
            "in spec/jit.yaml: add one (id, summary, mode, expect, observes, torch, source) or remove "
            "the scenario",
            pytrace=False,
        )
    if lim_id not in SCENARIOS:
        pytest.fail(
            f"{entry.loc}: limitation {lim_id!r} has no scenario: add @scenario({lim_id!r}) "
            "to conformance/jit_script.py, jit_trace.py or jit_compile.py",
            pytrace=False,
        )
    try:
        with eager_autocast(target.autocast_impl):
            obs = jit_scenarios.run(lim_id, target.spec)
    except ScenarioBug as bug:
        pytest.fail(
            f"{lim_id}: the scenario does not fit its spec entry: {bug}\n  {_repro(lim_id)}", pytrace=False
        )
    problems = mismatch(entry, obs)
    if problems:
        pytest.fail(
            f"{entry.loc}: {lim_id} ({entry.mode}): "
            + "; ".join(problems)
            + f"\n  seen: {obs.detail}\n  {_repro(lim_id)}",
            pytrace=False,
        )

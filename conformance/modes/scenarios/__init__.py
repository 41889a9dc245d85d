"""The JIT/compiler scenarios: one small program per limitation in ``spec/jit.yaml``.

Cases: every limitation of the spec and every scenario, by id (a limitation without a
scenario, or a scenario without a limitation, fails: never skips).
Procedure: the scenario runs on CPU autocast (bfloat16), which every torch build has.
Expectation: what it observes is what the entry says (``expect``, the error's message,
the outputs that differ from eager autocast, a second call's outcome).

The scenarios live in :mod:`.script`, :mod:`.trace`, :mod:`.compiled` and :mod:`.exported`
(shared parts: :mod:`.core`); importing this package registers them all. The compile
scenarios run with the run's ``--compile-backend`` (default ``aot_eager``). :func:`run` runs one with its
spec entry, leaving the autocast state and the JIT pass setting as found, and checks that the scenario and the
entry fit: the outputs match ``observes`` one to one, and an entry's ``observes`` is used
by its scenario. ``conformance/test_jit_limitations.py`` compares the observation with
the entry.

Reproduce one: ``python -c "from conformance.modes import scenarios as s; print(s.run('ID'))"``
(the bundled spec; ``run('ID', spec)`` for another, ``run('ID', backend='inductor')`` for another
``torch.compile`` backend).
"""

from __future__ import annotations

import torch

from autocast_spec.model import JitLimitation, Spec
from reference_impl.harness.state import autocast_state_kept, quiet
from reference_impl.spectools.installed_spec import load_installed_spec

from ...kit.case import Case
from ...kit.verdict import Observation
from ...target import Target
from ..run import DEFAULT_COMPILE_BACKEND
from . import compiled, exported, script, trace
from .core import DEVICE, SCENARIOS, ScenarioBug, ScenarioOutcome, Setting, eager_autocast

MODULES = (script, trace, compiled, exported)  # imported for their @scenario registrations
LIMITATION = "jit.limitation"
REPRODUCE = "python -c \"from conformance.modes import scenarios as s; print(s.run('{id}'{more}))\""


def scenario_ids() -> tuple[str, ...]:
    return tuple(SCENARIOS)


def run(
    limitation_id: str, spec: Spec | None = None, backend: str = DEFAULT_COMPILE_BACKEND
) -> ScenarioOutcome:
    """Run one scenario with its entry of ``spec`` (default: the bundled spec) and ``backend``
    for ``torch.compile``, leaving autocast state and the JIT pass setting as found. Raises
    :class:`ScenarioBug` where the scenario and its entry do not fit together."""
    spec = spec if spec is not None else load_installed_spec()
    entry = next((lim for lim in spec.limitations if lim.id == limitation_id), None)
    if entry is None:
        raise ScenarioBug(f"spec/jit.yaml has no limitation {limitation_id!r}")
    ctx = Setting(entry, spec, backend)
    pass_before = torch._C._jit_set_autocast_mode(True)
    torch._C._jit_set_autocast_mode(pass_before)
    try:
        with autocast_state_kept(DEVICE), quiet():
            obs = SCENARIOS[limitation_id](ctx)
    finally:
        torch._C._jit_set_autocast_mode(pass_before)
    if entry.observes and not ctx.used_observes:
        raise ScenarioBug(
            f"{entry.loc}: {entry.id} lists observes {list(entry.observes)}, but its scenario "
            "reports no op outputs: remove them"
        )
    return obs


def limitation_ids(spec: Spec) -> list[str]:
    """Every limitation of ``spec`` and every scenario, by id."""
    return sorted({lim.id for lim in spec.limitations} | set(SCENARIOS))


def mismatch(lim: JitLimitation, obs: ScenarioOutcome) -> list[str]:
    """Everything where the observation disagrees with the entry (empty: agreement)."""
    out = []
    if obs.outcome != lim.expect:
        seen = ", ".join(f"{op} → {dtype}" for op, dtype in obs.differs)
        head = f"expect {lim.expect!r}, observed {obs.outcome!r} {obs.message!r}"
        out.append(f"{head} ({seen})" if seen else head)
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


def limitation(target: Target, lim_id: str, backend: str = DEFAULT_COMPILE_BACKEND) -> Observation:
    """The scenario of ``lim_id`` against its spec entry (compile scenarios: with ``backend``)."""
    case = Case("jit", DEVICE)
    entry = next((lim for lim in target.spec.limitations if lim.id == lim_id), None)
    more = "" if backend == DEFAULT_COMPILE_BACKEND else f", backend={backend!r}"
    reproduce = REPRODUCE.format(id=lim_id, more=more)
    if entry is None:
        return Observation(
            case,
            LIMITATION,
            f"scenario {lim_id!r} has no entry in spec/jit.yaml: add one (id, summary, mode, "
            "expect, observes, torch, source) or remove the scenario (conformance/modes/scenarios/)",
            "an entry",
            "none",
            reproduce=reproduce,
        )
    if lim_id not in SCENARIOS:
        return Observation(
            case,
            LIMITATION,
            f"{entry.loc}: limitation {lim_id!r} has no scenario: add @scenario({lim_id!r}) "
            "to conformance/modes/scenarios/script.py, trace.py, compiled.py or exported.py",
            "a scenario",
            "none",
            reproduce=reproduce,
        )
    try:
        with eager_autocast(target.autocast_impl):
            obs = run(lim_id, target.spec, backend)
    except ScenarioBug as bug:
        return Observation(
            case,
            LIMITATION,
            f"{lim_id}: the scenario does not fit its spec entry",
            "they fit",
            str(bug),
            reproduce=reproduce,
        )
    return Observation(
        case,
        LIMITATION,
        f"{entry.loc}: {lim_id} ({entry.mode}) differs from its spec entry",
        [],
        mismatch(entry, obs),
        facts={"seen": obs.detail},
        reproduce=reproduce,
    )

"""jit: each limitation of TorchScript, trace, torch.compile and export in ``spec/jit.yaml``,
reproduced by its scenario and checked against the entry.

Cases: every limitation of the spec and every scenario, by id (a limitation without a
scenario, or a scenario without a limitation, fails: never skips).
Procedure: the scenario (:mod:`conformance.kit.scenarios`) runs on CPU autocast (bfloat16),
which every torch build has; the compile scenarios with the run's ``--compile-backend``
(default ``aot_eager``).
Expectation: what it observes is what the entry says (``expect``, the error's message,
the outputs that differ from eager autocast, a second call's outcome).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from autocast_spec.model import JitLimitation, Spec
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND

from ..kit.case import Case, omitted
from ..kit.category import Category
from ..kit.scenarios import SCENARIOS, ScenarioBug, ScenarioOutcome, eager_autocast, run
from ..kit.scenarios.core import DEVICE
from ..kit.verdict import Observation
from ..target import Target

LIMITATION = "jit.limitation"
REPRODUCE = "python -c \"from conformance.kit import scenarios as s; print(s.run('{id}'{more}))\""


@dataclass(frozen=True)
class Limitation:
    """A limitation of ``spec/jit.yaml`` (or a scenario), by id; a torch.compile limitation per
    ``--compile-backend``."""

    id: str
    backend: str = omitted(DEFAULT_COMPILE_BACKEND)
    WHOLE_ID: ClassVar[bool] = True
    ID: ClassVar[str] = "{id}{backend}"


def cases(target: Target) -> list[Case[Limitation]]:
    compiled = {lim.id for lim in target.spec.limitations if lim.mode == "compile"}
    return [
        Case("jit", DEVICE, params=Limitation(i, backend))
        for i in limitation_ids(target.spec)
        for backend in (target.compile_backends if i in compiled else (DEFAULT_COMPILE_BACKEND,))
    ]


CATEGORY = Category(
    "jit",
    __doc__,
    checks=(LIMITATION,),
    generators=(cases,),
    mandatory_able=False,
)


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


def limitation(target: Target, case: Case[Limitation]) -> Observation:
    """The case's scenario against its spec entry (compile scenarios: with the run's backend)."""
    assert case.params is not None
    lim_id, backend = case.params.id, case.params.backend
    entry = next((lim for lim in target.spec.limitations if lim.id == lim_id), None)
    more = "" if backend == DEFAULT_COMPILE_BACKEND else f", backend={backend!r}"
    reproduce = REPRODUCE.format(id=lim_id, more=more)
    if entry is None:
        return Observation(
            case,
            LIMITATION,
            f"scenario {lim_id!r} has no entry in spec/jit.yaml: add one (id, summary, mode, "
            "expect, observes, torch, source) or remove the scenario (conformance/kit/scenarios/)",
            "an entry",
            "none",
            reproduce=reproduce,
        )
    if lim_id not in SCENARIOS:
        return Observation(
            case,
            LIMITATION,
            f"{entry.loc}: limitation {lim_id!r} has no scenario: add @scenario({lim_id!r}) "
            "to conformance/kit/scenarios/script.py, trace.py, compiled.py or exported.py",
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

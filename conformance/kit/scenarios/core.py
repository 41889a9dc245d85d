"""What every JIT/compiler scenario shares: the observation, the registry, the baselines.

A scenario (:mod:`.script`, :mod:`.trace`, :mod:`.compiled`) is a small program
registered under the id of its limitation in ``spec/jit.yaml``. It runs the pattern on
CPU autocast (bfloat16; CPU autocast needs no accelerator) and returns an
:class:`ScenarioOutcome`: what happened on the first call (``error`` with the message,
``ignored``, ``works``, ``differs`` with the outputs that differ from eager autocast,
or ``crash``) and, where a scripted function behaves otherwise when called again,
what happened then. The scenarios hold no expectations: the test compares the
observation with the spec entry.

What a scenario checks against comes from the spec, through the :class:`Setting` it is
given: its outputs are labelled with the entry's ``observes`` ops (so a new divergence
shows up as a failure, not a pass), and the outputs it would give if the scenario's
autocast region were dropped are derived from the cpu spec's policy for those ops. The
setting also names the ``torch.compile`` backend the compile scenarios use
(``--compile-backend``; default ``aot_eager``, which needs no C++ toolchain).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from autocast_spec.model import JitLimitation, Policy, Spec
from reference_impl.engine.dtypes import dtype_name
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND

from ..verdict import first_line

DEVICE = "cpu"
LOWER = torch.bfloat16  # the autocast dtype every scenario's region names (CPU's default)

# A scenario's outputs in order: (label, dtype name or another observed value). Labels are
# the spec's ``observes`` ops, so one op may label several outputs.
Outputs = tuple[tuple[str, str], ...]


class ScenarioBug(Exception):
    """The scenario and its spec entry do not fit together (a bug in one of them)."""


@dataclass(frozen=True)
class ScenarioOutcome:
    outcome: str  # error | ignored | works | differs | crash
    message: str = ""
    differs: tuple[tuple[str, str], ...] = ()  # (op label, observed dtype) where not eager's
    later_calls: str | None = None  # outcome of a second call, when it differs from the first
    detail: str = ""  # everything seen, for failure messages

    def differs_set(self) -> frozenset[tuple[str, str]]:
        return frozenset(self.differs)


def policy_dtype(policy: Policy | None, inputs: str, lower: str) -> str:
    """The dtype an op of ``policy`` gives for eligible ``inputs`` under autocast to ``lower``
    (None: the device does not list the op, which then runs in its inputs' dtype)."""
    if policy is Policy.LOWER_PRECISION_FP:
        return lower
    if policy in (Policy.FP32, Policy.FP32_SET_OPT_DTYPE, Policy.FP32_APPEND_DTYPE):
        return "float32"
    if policy is Policy.BANNED:
        return "error"
    return inputs  # promote with inputs of one dtype, or an op autocast leaves alone


@dataclass
class Setting:
    """What a scenario gets from the spec: its entry (``observes``) and the spec's policies;
    and the run's ``torch.compile`` backend."""

    limitation: JitLimitation
    spec: Spec
    backend: str = DEFAULT_COMPILE_BACKEND
    used_observes: bool = field(default=False, init=False)

    @property
    def ops(self) -> tuple[str, ...]:
        """The entry's ``observes``: one op per output the scenario reports."""
        if not self.limitation.observes:
            raise ScenarioBug(
                f"{self.limitation.loc}: {self.limitation.id} names no ops (observes:) but its "
                "scenario reports op outputs: list them, one per output"
            )
        self.used_observes = True
        return self.limitation.observes

    def outputs(self, result: Any) -> Outputs:
        """Label ``result`` (one tensor or a tuple of them) with :attr:`ops`, in order."""
        outs = result if isinstance(result, (tuple, list)) else (result,)
        if len(outs) != len(self.ops):
            raise ScenarioBug(
                f"{self.limitation.loc}: observes lists {len(self.ops)} ops {list(self.ops)}, "
                f"the scenario returns {len(outs)} outputs"
            )
        return tuple((op, dtype_name(t.dtype)) for op, t in zip(self.ops, outs, strict=True))

    def without_region(self, inputs: torch.dtype) -> Outputs:
        """Each observed op when the scenario's region is dropped and no autocast is around:
        it runs in its inputs' dtype."""
        return tuple((op, dtype_name(inputs)) for op in self.ops)

    def under_outer_autocast(self, inputs: torch.dtype) -> Outputs:
        """Each observed op when the scenario's inner region is dropped and an outer autocast
        to :data:`LOWER` applies: the cpu spec's policy for the op decides."""
        cpu = self.spec.device(DEVICE)
        return tuple(
            (op, policy_dtype(cpu.policy_of(op), dtype_name(inputs), dtype_name(LOWER))) for op in self.ops
        )


Scenario = Callable[[Setting], ScenarioOutcome]
SCENARIOS: dict[str, Scenario] = {}


def scenario(limitation_id: str) -> Callable[[Scenario], Scenario]:
    def register(fn: Scenario) -> Scenario:
        if limitation_id in SCENARIOS:
            raise ValueError(f"two scenarios for limitation {limitation_id!r}")
        SCENARIOS[limitation_id] = fn
        return fn

    return register


# ---------------------------------------------------------------------------
# Shared helpers (pure decisions + the few side effects)
# ---------------------------------------------------------------------------


def _shown(outputs: Outputs) -> str:
    return "[" + ", ".join(f"{label}: {value}" for label, value in outputs) + "]"


def classify(observed: Outputs, eager: Outputs, dropped: Outputs) -> ScenarioOutcome:
    """``works`` if as eager autocast, ``ignored`` if as without the region, else ``differs``."""
    detail = (
        f"observed {_shown(observed)}; eager autocast {_shown(eager)}; without the region {_shown(dropped)}"
    )
    if observed == eager:
        return ScenarioOutcome("works", detail=detail)
    if observed == dropped:
        return ScenarioOutcome("ignored", detail=detail)
    diffs = tuple(sorted(o for o, e in zip(observed, eager, strict=True) if o != e))
    return ScenarioOutcome("differs", differs=diffs, detail=detail)


def run_twice(call: Callable[[], Outputs], eager: Outputs, dropped: Outputs) -> ScenarioOutcome:
    """Call twice: the first call decides ``outcome``; a differing second call sets ``later_calls``."""
    outcomes: list[ScenarioOutcome] = []
    for _ in range(2):
        try:
            outcomes.append(classify(call(), eager, dropped))
        except ScenarioBug:
            raise
        except Exception as exc:  # the mode's diagnostic is what we observe
            outcomes.append(ScenarioOutcome("error", message=first_line(exc), detail=repr(exc)[:500]))
    first, second = outcomes
    later = None if (second.outcome, second.differs) == (first.outcome, first.differs) else second.outcome
    return ScenarioOutcome(
        first.outcome,
        first.message,
        first.differs,
        later,
        f"{first.detail}; second call: {second.outcome} {second.message or second.detail}",
    )


def raised(fn: Callable[[], Any]) -> ScenarioOutcome:
    """For patterns that fail before anything runs (scripting itself raises)."""
    try:
        fn()
    except Exception as exc:
        return ScenarioOutcome("error", message=first_line(exc), detail=repr(exc)[:500])
    return ScenarioOutcome("works", detail="no error raised")


# The eager autocast of the scenarios' Python-level regions (``ac()``): torch.autocast, or
# the implementation under test (see eager_autocast). Scripted source always names
# torch.autocast, the only autocast TorchScript knows.
_EAGER_AUTOCAST: list[Callable[..., Any]] = [torch.autocast]


@contextlib.contextmanager
def eager_autocast(impl: Callable[..., Any]) -> Iterator[None]:
    """Run the scenarios' eager regions with ``impl`` (called like ``torch.autocast``)."""
    _EAGER_AUTOCAST.append(impl)
    try:
        yield
    finally:
        _EAGER_AUTOCAST.pop()


def ac(enabled: bool = True, cache_enabled: bool | None = None) -> Any:
    return _EAGER_AUTOCAST[-1](device_type=DEVICE, dtype=LOWER, enabled=enabled, cache_enabled=cache_enabled)


@contextlib.contextmanager
def jit_autocast_pass(enabled: bool) -> Iterator[None]:
    old = torch._C._jit_set_autocast_mode(enabled)
    try:
        yield
    finally:
        torch._C._jit_set_autocast_mode(old)


def mats(n: int = 2, dtype: torch.dtype = torch.float32, size: int = 4) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.rand(size, size, generator=gen).to(dtype) for _ in range(n)]


def values(labels: Sequence[str], observed: Sequence[Any]) -> Outputs:
    """Non-dtype observations (a state, a flag), labelled."""
    return tuple((label, str(v)) for label, v in zip(labels, observed, strict=True))

"""The JIT/compiler scenarios: one small program per limitation in ``spec/jit.yaml``.

The scenarios live in :mod:`.script`, :mod:`.trace`, :mod:`.compiled` and :mod:`.exported`
(shared parts: :mod:`.core`); importing this package registers them all. :func:`run` runs one
with its spec entry, leaving the autocast state and the JIT pass setting as found, and checks
that the scenario and the entry fit: the outputs match ``observes`` one to one, and an entry's
``observes`` is used by its scenario. The ``jit`` category (``conformance/categories/jit.py``)
compares the observation with the entry.

Reproduce one: ``python -c "from conformance.kit import scenarios as s; print(s.run('ID'))"``
(the bundled spec; ``run('ID', spec)`` for another, ``run('ID', backend='inductor')`` for another
``torch.compile`` backend).
"""

from __future__ import annotations

import torch

from autocast_spec.model import Spec
from reference_impl.harness.state import autocast_state_kept, quiet
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND
from reference_impl.spectools.installed_spec import load_installed_spec

from . import compiled, exported, script, trace
from .core import DEVICE, SCENARIOS, ScenarioBug, ScenarioOutcome, Setting, eager_autocast

MODULES = (script, trace, compiled, exported)  # imported for their @scenario registrations

__all__ = ["SCENARIOS", "ScenarioBug", "ScenarioOutcome", "eager_autocast", "run", "scenario_ids"]


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

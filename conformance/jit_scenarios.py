"""The runner of the JIT/compiler scenarios: one per limitation in ``spec/jit.yaml``.

The scenarios live in :mod:`conformance.jit_script`, :mod:`conformance.jit_trace` and
:mod:`conformance.jit_compile` (shared parts: :mod:`conformance.jit_core`); importing
this module registers them all. :func:`run` runs one with its spec entry, leaving the
autocast state and the JIT pass setting as found, and checks that the scenario and the
entry fit: the outputs match ``observes`` one to one, and an entry's ``observes`` is used
by its scenario. ``conformance/test_jit_limitations.py`` compares the observation with
the entry.

Reproduce one: ``python -c "from conformance import jit_scenarios as j; print(j.run('ID'))"``
(the bundled spec; ``run('ID', spec)`` for another).
"""

from __future__ import annotations

import torch

from autocast_spec.model import Spec
from reference_impl.installed_spec import load_installed_spec
from reference_impl.runtime import autocast_state_kept, quiet

from . import jit_compile, jit_script, jit_trace
from .jit_core import DEVICE, SCENARIOS, ScenarioBug, ScenarioOutcome, Setting

MODULES = (jit_script, jit_trace, jit_compile)  # imported for their @scenario registrations


def scenario_ids() -> tuple[str, ...]:
    return tuple(SCENARIOS)


def run(limitation_id: str, spec: Spec | None = None) -> ScenarioOutcome:
    """Run one scenario with its entry of ``spec`` (default: the bundled spec), leaving
    autocast state and the JIT pass setting as found. Raises :class:`ScenarioBug` where the
    scenario and its entry do not fit together."""
    spec = spec if spec is not None else load_installed_spec()
    entry = next((lim for lim in spec.limitations if lim.id == limitation_id), None)
    if entry is None:
        raise ScenarioBug(f"spec/jit.yaml has no limitation {limitation_id!r}")
    ctx = Setting(entry, spec)
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

"""The mutants: each one deliberate deviation from the spec, injected into a real backend.

One module per category of mutant: :mod:`.policies` (policy moves, registration),
:mod:`.ops` (eligibility, numerics, promote, banned, dtype arguments, autograd),
:mod:`.context` (context, threads, cache), :mod:`.custom` (custom functions and ops),
:mod:`.jit`, and :mod:`.reference` (self-conformance). :mod:`.mutant` says what a mutant is
and how one is made. Kernel mutants register wrong Autocast kernels (on ``AutocastCPU``, or
on ``AutocastCUDA`` for the policy-only cuda backend); the others monkeypatch
``torch.autocast``, ``torch.amp.custom_fwd`` / ``custom_bwd``, the cast cache or the JIT.

Op names appear here because this is a test of the tests; :func:`check_catalogue`
verifies against the spec that each named op still has the policy the mutant
assumes, so a spec change gives a clear error instead of a vacuous mutant.
"""

from __future__ import annotations

from .. import kernels as K
from .context import CONTEXT_MUTANTS
from .custom import CUSTOM_MUTANTS
from .jit import JIT_MUTANTS
from .mutant import OP_FILES, Mutant, op_keyword
from .ops import OP_MUTANTS
from .policies import EQUIVALENT, POLICY_MUTANTS
from .reference import REFERENCE_MUTANTS

__all__ = ["BY_ID", "EQUIVALENT", "MUTANTS", "OP_FILES", "Mutant", "check_catalogue", "op_keyword"]

MUTANTS: tuple[Mutant, ...] = (
    *POLICY_MUTANTS,
    *OP_MUTANTS,
    *CONTEXT_MUTANTS,
    *CUSTOM_MUTANTS,
    *JIT_MUTANTS,
    *REFERENCE_MUTANTS,
)
BY_ID = {m.id: m for m in MUTANTS}


def check_catalogue() -> list[str]:
    """Problems with the catalogue against the bundled spec (empty: fine)."""
    spec = K.bundled()
    problems = []
    if len(BY_ID) != len(MUTANTS):
        problems.append("mutant ids are not unique")
    for m in MUTANTS:
        for device, op, policy in m.assumes:
            have = spec.device(device).policy_of(op)
            got = have.value if have is not None else None
            if got != policy:
                problems.append(
                    f"{m.id}: assumes {op} is {policy or 'unlisted'} on {device}, the spec says {got}"
                )
    return problems

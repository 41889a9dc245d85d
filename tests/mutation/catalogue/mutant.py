"""What a mutant is, and the two ways the catalogue's modules make one.

A :class:`Mutant` names the suite selection that must catch it (options, test files and
a ``-k`` expression) and an ``install`` function that the mutant plugin calls in the
suite's subprocess before any test runs. :func:`kernel_mutant`: a wrong Autocast kernel
for one op (its selection: every test of the op in :data:`OP_FILES`; it assumes the op's
policy, which :func:`~mutation.catalogue.check_catalogue` holds against the spec).
:func:`context_mutant`: a monkeypatched ``torch.autocast``, custom function, cache or JIT
(its selection: whole test files).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from helpers.suite_runs import suite_selection

CPU = ("--backend", "cpu")
CUDA_FAKE = ("--backend", "cuda", "--policy-only")
OP_FILES = (
    "test_op_policy.py",
    "test_numerics.py",
    "test_eligibility.py",
    "test_registration.py",
    "test_unlisted.py",
    "test_promote.py",
    "test_banned.py",
    "test_opt_dtype.py",
    "test_autograd.py",
)


@dataclass(frozen=True)
class Mutant:
    id: str
    category: str  # the suite category the deviation belongs to
    what: str  # what the mutated backend does wrong, in one line
    options: tuple[str, ...]  # suite options (backend, dtype, mode)
    files: tuple[str, ...]  # conformance test files to run
    keyword: str | None  # the -k expression, or None for all of the files
    install: Callable[[], None]
    assumes: tuple[tuple[str, str, str | None], ...] = ()  # (device, op, policy or None=unlisted)

    @property
    def selection(self) -> tuple[str, ...]:
        """The suite arguments, the same with and without the mutant."""
        return suite_selection(self.options, self.files, self.keyword)


def op_keyword(op: str) -> str:
    """Every generated test of ``op`` (ids carry ``...-aten::op-...`` or end in ``aten::op]``)."""
    return f"{op}] or {op}-"


def options_for(device: str) -> tuple[str, ...]:
    """The suite options of a kernel mutant on ``device``: cpu, or cuda policy-only (FakeTensors)."""
    return CPU if device == "cpu" else CUDA_FAKE


def kernel_mutant(
    id: str,
    category: str,
    what: str,
    device: str,
    op: str,
    install: Callable[[], None],
    policy: str | None,
    files: tuple[str, ...] = OP_FILES,
    options: tuple[str, ...] | None = None,
) -> Mutant:
    """A wrong Autocast kernel for ``op`` on ``device``, which the spec lists under ``policy``."""
    return Mutant(
        id,
        category,
        what,
        options or options_for(device),
        files,
        op_keyword(op),
        install,
        ((device, op, policy),),
    )


def context_mutant(
    id: str,
    category: str,
    what: str,
    files: tuple[str, ...],
    install: Callable[[], None],
    keyword: str | None = None,
    options: tuple[str, ...] = CPU,
) -> Mutant:
    """A deviation outside the Autocast kernels, caught by whole test files (``keyword``: fewer)."""
    return Mutant(id, category, what, options, files, keyword, install)

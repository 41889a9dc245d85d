"""Mutation testing: every deliberate deviation in tests/mutation/catalogue/ makes the suite fail.

Each mutant runs its selection of the suite in a subprocess with the mutant installed
and must produce test failures (not a crash, a usage error or an empty run); the same
selection without the mutant must pass and not be empty. The table of
mutants in docs/proving.md names, for each, tests that killed it: they must still be among the failures.
``tests/conftest.py`` prints ``mutation score: K/N killed`` at the end of the run.
"""

from __future__ import annotations

from collections import Counter

import pytest
from mutation.catalogue import EQUIVALENT, MUTANTS, Mutant, check_catalogue
from mutation.harness import run, selections, short, table_rows

pytestmark = pytest.mark.mutation

# Every category of the suite that a backend can get wrong has mutants.
CATEGORIES = {
    "policy",
    "registration",
    "op_policy",
    "eligibility",
    "numerics",
    "promote",
    "banned",
    "opt_dtype",
    "autograd",
    "context",
    "threads",
    "cache",
    "custom_function",
    "custom_op",
    "jit",
    "self-conformance",
}


def test_catalogue() -> None:
    assert not check_catalogue(), "\n".join(check_catalogue())
    assert len(MUTANTS) >= 40, len(MUTANTS)
    per_category = Counter(m.category for m in MUTANTS)
    assert set(per_category) == CATEGORIES, per_category
    for op, dst in EQUIVALENT:  # equivalent moves are listed, not run
        suffix = f"{op.removeprefix('aten::')}-to-{dst.value}"
        assert not [m.id for m in MUTANTS if m.id.endswith(suffix)], suffix


def test_the_table_lists_every_mutant() -> None:
    rows = table_rows()
    assert set(rows) == {m.id for m in MUTANTS}, (
        "docs/proving.md's mutation table is out of date: "
        "run `cd tests && python -m mutation.harness --update-docs`"
    )


@pytest.mark.parametrize("selection", selections(MUTANTS), ids=lambda s: " ".join(s))
def test_unmutated_selection_passes(selection: tuple[str, ...]) -> None:
    r = run(selection, None)
    assert r.returncode == 0 and r.passed, f"the selection fails without any mutant:\n{r.repro()}"


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.id)
def test_mutant_is_killed(mutant: Mutant, record_property: pytest.RecordProperty) -> None:
    r = run(mutant.selection, mutant.id)
    record_property("killed_by", len(r.failed))
    assert r.killed, f"mutant {mutant.id} survived ({mutant.what}):\n{r.repro()}"
    named = table_rows().get(mutant.id, [])
    failed = {short(t) for t in r.failed}
    stale = [t for t in named if t not in failed]
    assert not stale, (
        f"docs/proving.md names {stale} as killing {mutant.id}, but they did not fail; "
        f"failures: {sorted(failed)}"
    )

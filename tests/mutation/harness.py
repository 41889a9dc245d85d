"""Run a mutant's selection of the suite with and without the mutant.

``python -m mutation.harness`` (with ``tests/`` on ``PYTHONPATH``; ``-j N`` runs N at
a time) runs every mutant and its unmutated selection, prints the table of mutants
and the tests that killed each (Markdown, as in docs/proving.md), and
``mutation score: K/N killed``; it exits 1 unless every mutant is killed and every
unmutated selection passes.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

from helpers.suite_runs import SuiteRun, replace_table_block, run_injected, short
from helpers.suite_runs import table_rows as _table_rows

from .catalogue import MUTANTS, Mutant
from .plugin import ENV

__all__ = ["SuiteRun", "run", "selections", "short", "table", "table_rows"]

run = functools.partial(run_injected, plugin="mutation.plugin", env_var=ENV)


def selections(mutants: Iterable[Mutant]) -> list[tuple[str, ...]]:
    return sorted({m.selection for m in mutants})


def table(runs: dict[str, SuiteRun], mutants: Iterable[Mutant] = MUTANTS, limit: int = 2) -> str:
    """Markdown: one row per mutant with the tests that killed it."""
    rows = [
        "| mutant | category | what the backend does wrong | killed by (failing tests) |",
        "|---|---|---|---|",
    ]
    for m in mutants:
        r = runs.get(m.id)
        if r is None:
            cell = "(not run)"
        elif not r.killed:
            cell = "**survived**"
        else:
            k = r.killers() or [short(t) for t in r.failed]
            more = f" and {len(r.failed) - limit} more" if len(r.failed) > limit else ""
            cell = ", ".join(f"`{t}`" for t in k[:limit]) + more
        rows.append(f"| `{m.id}` | {m.category} | {m.what} | {cell} |")
    return "\n".join(rows)


START, END = "<!-- mutation-table:start -->", "<!-- mutation-table:end -->"


def table_rows() -> dict[str, list[str]]:
    """Mutant id -> the killing tests docs/proving.md names for it."""
    return _table_rows(START, END, 4)


def update_docs(runs: dict[str, SuiteRun]) -> None:
    killed = sum(1 for r in runs.values() if r.killed)
    replace_table_block(START, END, f"{table(runs)}\n\nmutation score: {killed}/{len(runs)} killed\n")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mutation.harness", description=__doc__)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="suite runs at a time (default 2)")
    ap.add_argument("ids", nargs="*", help="mutant ids (default: all)")
    ap.add_argument(
        "--update-docs",
        action="store_true",
        help="rewrite the mutation table in docs/proving.md (all mutants only)",
    )
    a = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not a.ids or m.id in a.ids]
    with ThreadPoolExecutor(a.jobs) as pool:
        base = dict(
            zip(selections(chosen), pool.map(lambda s: run(s, None), selections(chosen)), strict=True)
        )
        runs = dict(
            zip((m.id for m in chosen), pool.map(lambda m: run(m.selection, m.id), chosen), strict=True)
        )
    print(table(runs, chosen))
    if a.update_docs:
        if a.ids:
            raise SystemExit("--update-docs needs the whole catalogue: give no mutant ids")
        update_docs(runs)
    bad_base = [s for s, r in base.items() if r.returncode != 0 or not r.passed]
    for s in bad_base:
        print(f"unmutated selection does not pass: {' '.join(s)}\n{base[s].tail}", file=sys.stderr)
    killed = sum(1 for r in runs.values() if r.killed)
    print(f"mutation score: {killed}/{len(runs)} killed")
    return 0 if killed == len(runs) and not bad_base else 1


if __name__ == "__main__":
    sys.exit(main())

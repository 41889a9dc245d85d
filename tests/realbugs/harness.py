"""Measure the conformance suite against the real-bug corpus.

``python -m realbugs.harness`` (``tests/`` on ``PYTHONPATH``; ``-j N`` runs N at a time)
checks every entry three ways: (a) its witness shows the deviation (with and without the
replay the results differ; for a bug torch itself still has, the witness shows what the
corpus records), (b) the entry's suite selection fails with the replay (exit 1 with test
failures) or, for a bug the installed torch has, the clean run reports the spec's declaration
(tests xfailed with the reason ``known bug <id> ...``, the id the entry's ``known_bug`` names,
or with a declared value divergence of the op or region the entry's ``value_divergence``
names that cites the entry's url), (c) the same selection passes without it (one clean run
per distinct selection). It prints the table (Markdown, as in docs/proving.md) and
``real bugs caught: K/N``, and exits 1 on an error (a replay that changes nothing, a
clean run that fails) or an entry whose outcome differs from its ``expected``.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from helpers import warm
from helpers.suite_runs import (
    SuiteRun,
    replace_table_block,
    run_injected,
    short,
    summary,
    table_block,
)

from .corpus import ENTRIES, Entry
from .plugin import ENV

run = functools.partial(run_injected, plugin="realbugs.plugin", env_var=ENV)
START, END = "<!-- realbugs-table:start -->", "<!-- realbugs-table:end -->"


@dataclass(frozen=True)
class Witness:
    clean: Any = None
    replayed: Any = None
    error: str | None = None  # the witness process failed


def witness(entry: Entry) -> Witness:
    """The entry's witness, before and after its replay, in a process of its own (forked warm)."""
    p = warm.run([entry.id], {}, timeout=600, module="realbugs.show")
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        return Witness(error=summary(p))
    out = json.loads(lines[-1])
    return Witness(out.get("clean"), out.get("replayed"))


def deviation_problem(entry: Entry, p: Witness) -> str | None:
    """Why the witness does not show the bug (None: it does)."""
    if p.error is not None:
        return f"the witness failed:\n{p.error}"
    if entry.kind == "replay" and p.clean == p.replayed:
        return f"the replay changes nothing the witness sees (both: {p.clean!r}): it is not the bug"
    if entry.kind == "present" and p.clean != entry.present:
        return (
            f"the installed torch no longer shows it: witness gives {p.clean!r}, the corpus records "
            f"{entry.present!r}; write a replay (a kind module, realbugs.registry.KINDS) and drop present:"
        )
    return None


@dataclass(frozen=True)
class Outcome:
    entry: Entry
    status: str  # caught | missed | uncatchable | error
    run: SuiteRun | None = None
    problem: str | None = None

    @property
    def as_expected(self) -> bool:
        if self.status in ("error", "uncatchable"):
            return self.status == "uncatchable"
        return self.status == self.entry.expected


def evaluate(entry: Entry, p: Witness | None, clean: SuiteRun | None, replayed: SuiteRun | None) -> Outcome:
    """The entry's outcome from its witness, its selection's clean run and its replayed run."""
    if entry.kind == "uncatchable":
        return Outcome(entry, "uncatchable")
    assert p is not None and clean is not None
    problem = deviation_problem(entry, p)
    if problem is None and (clean.returncode != 0 or not clean.passed):
        problem = f"the selection fails (or is empty) without the replay:\n{clean.repro()}"
    if problem is not None:
        return Outcome(entry, "error", replayed, problem)
    if entry.kind == "present":
        return Outcome(entry, "caught" if reported(entry, clean) else "missed", clean)
    assert replayed is not None
    return Outcome(entry, "caught" if replayed.killed else "missed", replayed)


KNOWN_BUG_PREFIX = "known bug "  # conformance.kit.verdict.XFAIL_PREFIX
DECLARED_VALUES_PREFIX = "declared value divergence: "  # conformance.kit.divergences.DECLARED_VALUES


def reported(entry: Entry, run_: SuiteRun) -> list[str]:
    """The tests of a clean run that report a present entry: xfailed with its declared known bug,
    or with a declared value divergence of its op or region that cites the entry's url."""
    if entry.value_divergence:
        return run_.xfailed_with(DECLARED_VALUES_PREFIX, f" {entry.value_divergence} ", entry.url)
    if not entry.known_bug:
        return []
    return run_.xfailed_with(f"{KNOWN_BUG_PREFIX}{entry.known_bug} ")


def cell(o: Outcome | None, entry: Entry, limit: int = 2) -> str:
    """The "caught by" cell: failing tests, or why not caught."""
    if entry.kind == "uncatchable":
        return f"uncatchable: {entry.uncatchable}"
    status = o.status if o is not None else entry.expected
    if status == "caught":
        if o is None or o.run is None:
            return "caught"
        r = o.run
        if entry.kind == "present":
            k = reported(entry, r)
            more = f" and {len(k) - limit} more" if len(k) > limit else ""
            kind = "declared value divergence" if entry.value_divergence else "known bug"
            return f"xfail ({kind}): " + ", ".join(f"`{t}`" for t in k[:limit]) + more
        k = r.killers() or [short(t) for t in r.failed]
        more = f" and {len(r.failed) - limit} more" if len(r.failed) > limit else ""
        return ", ".join(f"`{t}`" for t in k[:limit]) + more
    if status == "missed":
        return "missed (torch 2.13 still has it)" if entry.kind == "present" else "missed"
    return f"**{status}**"


def table(outcomes: dict[str, Outcome], entries: Iterable[Entry] = ENTRIES) -> str:
    rows = ["| real bug | category | symptom | caught by (failing tests) |", "|---|---|---|---|"]
    for e in entries:
        rows.append(f"| `{e.id}` | {e.category} | {e.symptom} | {cell(outcomes.get(e.id), e)} |")
    return "\n".join(rows)


def score(outcomes: Iterable[Outcome]) -> tuple[int, int]:
    """(caught, entries the suite can see); uncatchable entries are listed, not scored."""
    done = [o for o in outcomes if o.status != "uncatchable"]
    return sum(1 for o in done if o.status == "caught"), len(done)


def score_line(outcomes: Iterable[Outcome]) -> str:
    done = list(outcomes)
    k, n = score(done)
    apart = sum(1 for o in done if o.status == "uncatchable")
    return f"real bugs caught: {k}/{n}" + (
        f" ({apart} more listed as uncatchable by design, with the reason)" if apart else ""
    )


def block(outcomes: dict[str, Outcome]) -> str:
    return f"{table(outcomes)}\n\n{score_line(outcomes.values())}\n"


def doc_table_rows() -> list[list[str]]:
    """The table rows of docs/proving.md's block, as cells."""
    lines = [ln for ln in table_block(START, END).splitlines() if ln.startswith("| `")]
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]


def selections(entries: Iterable[Entry]) -> list[tuple[str, ...]]:
    return sorted({e.selection for e in entries if e.kind != "uncatchable"})


def run_all(entries: Sequence[Entry], jobs: int) -> dict[str, Outcome]:
    active = [e for e in entries if e.kind != "uncatchable"]
    replayable = [e for e in active if e.kind == "replay"]
    with ThreadPoolExecutor(jobs) as pool:
        witnesses = dict(zip((e.id for e in active), pool.map(witness, active), strict=True))
        clean = dict(
            zip(selections(active), pool.map(lambda s: run(s, None), selections(active)), strict=True)
        )
        replayed = dict(
            zip(
                (e.id for e in replayable),
                pool.map(lambda e: run(e.selection, e.id), replayable),
                strict=True,
            )
        )
    return {
        e.id: evaluate(e, witnesses.get(e.id), clean.get(e.selection), replayed.get(e.id)) for e in entries
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m realbugs.harness", description=__doc__)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="subprocesses at a time (default 2)")
    ap.add_argument("ids", nargs="*", help="entry ids (default: all)")
    ap.add_argument(
        "--update-docs",
        action="store_true",
        help="rewrite the real-bug table in docs/proving.md (all entries only)",
    )
    a = ap.parse_args(argv)
    chosen = [e for e in ENTRIES if not a.ids or e.id in a.ids]
    outcomes = run_all(chosen, a.jobs)
    print(table(outcomes, chosen))
    for o in outcomes.values():
        if o.problem:
            print(f"ERROR {o.entry.id}: {o.problem}", file=sys.stderr)
        elif not o.as_expected:
            print(f"{o.entry.id}: {o.status}, corpus expects {o.entry.expected}", file=sys.stderr)
        elif o.status == "missed":
            print(f"missed {o.entry.id}: needs {o.entry.check}")
    if a.update_docs:
        if a.ids:
            raise SystemExit("--update-docs needs the whole corpus: give no ids")
        replace_table_block(START, END, block(outcomes))
    print(score_line(outcomes.values()))
    k, n = score(outcomes.values())
    return 0 if k == n and all(o.as_expected for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

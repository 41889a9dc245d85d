"""Run a mutant's selection of the suite with and without the mutant.

``python -m mutation.harness`` (with ``tests/`` on ``PYTHONPATH``; ``-j N`` runs N at
a time) runs every mutant and its unmutated selection, prints the table of mutants
and the tests that killed each (Markdown, as in the README), and
``mutation score: K/N killed``; it exits 1 unless every mutant is killed and every
unmutated selection passes.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from suite_runs import ROOT, outcomes, run_suite, summary, with_tests_on_path

from .catalogue import MUTANTS, Mutant
from .plugin import ENV

# Hypothesis tests pick their examples at random; the table names deterministic killers.
NONDETERMINISTIC = ("test_hypothesis.py",)


@dataclass(frozen=True)
class SuiteRun:
    selection: tuple[str, ...]
    mutant: str | None
    returncode: int
    results: dict[str, str]  # test id -> passed | failure | error | skipped
    tail: str  # the end of the output, for failure messages

    @property
    def killed(self) -> bool:
        """Tests failed (exit 1 with failures): not a crash, a usage error or an empty run."""
        return self.returncode == 1 and any(r == "failure" for r in self.results.values())

    @property
    def failed(self) -> list[str]:
        return sorted(t for t, r in self.results.items() if r in ("failure", "error"))

    @property
    def passed(self) -> list[str]:
        return sorted(t for t, r in self.results.items() if r == "passed")

    def killers(self) -> list[str]:
        """The failed tests that fail whatever the random draw (short ids)."""
        return [short(t) for t in self.failed if not any(n in t for n in NONDETERMINISTIC)]

    def repro(self) -> str:
        env = f"{ENV}={self.mutant} " if self.mutant else ""
        sel = " ".join(repr(a) if " " in a else a for a in self.selection)
        return f"cd <repo> && {env}PYTHONPATH=tests python -m pytest {sel} -p mutation.plugin\n{self.tail}"


def short(test_id: str) -> str:
    """``conformance.test_op_policy::test_op_policy[...]`` -> ``test_op_policy[...]``."""
    name, bracket, params = test_id.partition("[")
    return name.rpartition("::")[2] + bracket + params


def run(selection: Sequence[str], mutant: str | None) -> SuiteRun:
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        env = with_tests_on_path({ENV: mutant} if mutant else {ENV: ""})
        p = run_suite(*selection, "-p", "mutation.plugin", f"--junitxml={xml}", env_extra=env, paths=())
        results = outcomes(xml) if xml.exists() else {}
    return SuiteRun(tuple(selection), mutant, p.returncode, results, summary(p))


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


README = ROOT / "README.md"
START, END = "<!-- mutation-table:start -->", "<!-- mutation-table:end -->"


def readme_rows() -> dict[str, list[str]]:
    """Mutant id -> the killing tests the README names for it."""
    text = README.read_text(encoding="utf-8")
    block = text[text.index(START) : text.index(END)] if START in text and END in text else ""
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = re.findall(r"`([^`]+)`", cells[3])
    return rows


def update_readme(runs: dict[str, SuiteRun]) -> None:
    text = README.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"README.md has no {START} ... {END} block to update")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    killed = sum(1 for r in runs.values() if r.killed)
    body = f"{table(runs)}\n\nmutation score: {killed}/{len(runs)} killed\n"
    README.write_text(f"{head}{START}\n{body}{END}{tail}", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mutation.harness", description=__doc__)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="suite runs at a time (default 2)")
    ap.add_argument("ids", nargs="*", help="mutant ids (default: all)")
    ap.add_argument(
        "--update-readme", action="store_true", help="rewrite README.md's mutation table (all mutants only)"
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
    if a.update_readme:
        if a.ids:
            raise SystemExit("--update-readme needs the whole catalogue: give no mutant ids")
        update_readme(runs)
    bad_base = [s for s, r in base.items() if r.returncode != 0 or not r.passed]
    for s in bad_base:
        print(f"unmutated selection does not pass: {' '.join(s)}\n{base[s].tail}", file=sys.stderr)
    killed = sum(1 for r in runs.values() if r.killed)
    print(f"mutation score: {killed}/{len(runs)} killed")
    return 0 if killed == len(runs) and not bad_base else 1


if __name__ == "__main__":
    sys.exit(main())

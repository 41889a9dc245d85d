"""Real-bug corpus: publicly reported autocast bugs replayed, and the suite measured against them.

For each entry of tests/realbugs/corpus.yaml: its witness must show the deviation (a replay
that changes nothing is an error, not a catch), its suite selection must pass without
the replay (one run per distinct selection), and with the replay it must fail as the
entry's transitional ``expected`` says; a caught bug the installed torch still has is
reported by the clean run as an xfail naming its declared known bug (spec/rules.yaml). Missed
(present-in-torch ones included) and uncatchable entries
are xfails with the reason (never counted as caught); ``tests/conftest.py`` prints
``real bugs caught: K/N``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from helpers.suite_runs import SuiteRun, short
from realbugs.corpus import CATEGORIES, ENTRIES, Entry, check_corpus
from realbugs.harness import (
    Witness,
    cell,
    deviation_problem,
    doc_table_rows,
    evaluate,
    reported,
    run,
    selections,
    witness,
)

pytestmark = pytest.mark.realbugs


def test_corpus() -> None:
    assert not check_corpus(), "\n".join(check_corpus())
    assert len(ENTRIES) >= 30, len(ENTRIES)
    kinds = Counter(e.kind for e in ENTRIES)
    assert set(kinds) == {"replay", "present", "uncatchable"}, kinds
    assert len({e.category for e in ENTRIES}) >= len(CATEGORIES) - 1, Counter(e.category for e in ENTRIES)
    assert len({e.id.partition("#")[0] for e in ENTRIES}) >= 4, "reports from out-of-tree backends too"


def test_the_table_matches_the_corpus() -> None:
    rows = {r[0].strip("`"): r for r in doc_table_rows()}
    assert set(rows) == {e.id for e in ENTRIES}, (
        "docs/proving.md's real-bug table is out of date: "
        "run `cd tests && python -m realbugs.harness --update-docs`"
    )
    for e in ENTRIES:
        want = [f"`{e.id}`", e.category, e.symptom]
        assert rows[e.id][:3] == want, f"docs/proving.md row for {e.id}: {rows[e.id][:3]} != {want}"
        if e.expected != "caught" or e.kind == "uncatchable":
            assert rows[e.id][3] == cell(None, e), f"docs/proving.md's last cell for {e.id}"


def test_noop_replay_is_an_error() -> None:
    """A replay the witness cannot tell from torch is an error, even when the suite run fails."""
    entry = next(e for e in ENTRIES if e.kind == "replay")
    same = Witness(clean="bfloat16", replayed="bfloat16")
    assert "changes nothing" in (deviation_problem(entry, same) or "")
    passed = SuiteRun(entry.selection, None, 0, {"t": "passed"}, "")
    failed = SuiteRun(entry.selection, entry.id, 1, {"t": "failure"}, "")
    assert evaluate(entry, same, passed, failed).status == "error"
    assert evaluate(entry, Witness("bfloat16", "float32"), passed, failed).status == "caught"
    gone = replace(next(e for e in ENTRIES if e.kind == "present"), present="what torch used to show")
    assert "no longer shows it" in (deviation_problem(gone, Witness(clean="fixed")) or "")


@pytest.mark.parametrize("selection", selections(ENTRIES), ids=lambda s: " ".join(s))
def test_clean_selection_passes(selection: tuple[str, ...]) -> None:
    r = run(selection, None)
    assert r.returncode == 0 and r.passed, f"the selection fails without any replay:\n{r.repro()}"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.slug)
def test_real_bug(entry: Entry) -> None:
    if entry.kind == "uncatchable":
        pytest.xfail(f"uncatchable: {entry.uncatchable}")
    p = witness(entry)
    problem = deviation_problem(entry, p)
    assert problem is None, f"{entry.id}: {problem}"
    if entry.kind == "present":
        if entry.expected == "missed":
            pytest.xfail(f"finding: torch shows it ({p.clean!r}); the suite misses it; needs: {entry.check}")
        clean = run(entry.selection, None)
        assert clean.returncode == 0 and clean.passed, f"the selection fails on this torch:\n{clean.repro()}"
        xfails = reported(entry, clean)
        assert xfails, f"{entry.id}: no test reports known bug {entry.known_bug} (xfail):\n{clean.repro()}"
        _assert_table_names(entry, set(xfails))
        return
    r = run(entry.selection, entry.id)
    if entry.expected == "missed":
        assert not r.killed, (
            f"{entry.id} is now caught: set expected: caught and regenerate the table in docs/proving.md"
        )
        pytest.xfail(f"missed: needs {entry.check}")
    assert r.killed, f"{entry.id} ({entry.symptom}) is not caught:\n{r.repro()}"
    _assert_table_names(entry, {short(t) for t in r.failed})


def _assert_table_names(entry: Entry, failed: set[str]) -> None:
    named = {row[0].strip("`"): row[3] for row in doc_table_rows()}.get(entry.id, "")
    stale = [t for t in named.split("`")[1::2] if t not in failed]
    assert not stale, (
        f"docs/proving.md names {stale} as catching {entry.id}, but they did not report it: {sorted(failed)}"
    )


def test_present_entry_is_caught_only_through_its_known_bug() -> None:
    """A bug the installed torch has counts as caught when the clean run reports its declared
    known bug as an xfail; a pass, another known bug's xfail or a plain skip is a miss."""
    entry = next(e for e in ENTRIES if e.kind == "present" and e.known_bug)
    p = Witness(clean=entry.present)
    t = "conformance/test_x.py::test_x[a]"
    mine = f"known bug {entry.known_bug} (https://github.com/x/y/issues/1): why"
    for reasons, status in (
        ({t: mine}, "caught"),
        ({t: "known bug some-other-bug (https://x): why"}, "missed"),
        ({t: f"skipped: {mine}"}, "missed"),
        ({}, "missed"),
    ):
        clean = SuiteRun(entry.selection, None, 0, {t: "skipped", "t2": "passed"}, "", reasons=reasons)
        assert evaluate(entry, p, clean, None).status == status, reasons


def test_a_value_finding_is_caught_only_through_its_declared_divergence() -> None:
    """A finding of values counts as caught when the clean run reports the value divergence its
    entry names, citing the entry's url; another region's, another source's, none: a miss."""
    entry = next(e for e in ENTRIES if e.kind == "present" and e.value_divergence)
    p = Witness(clean=entry.present)
    t = "conformance/test_modes.py::test_region_matches_eager[a]"
    mine = (
        f"declared value divergence: compile (inductor, emulate_precision_casts) region "
        f"{entry.value_divergence} (autocast bfloat16): max abs error 0.0078 (declared 0.00782): why "
        f"[condition: host any, emulate_precision_casts; {entry.url}]"
    )
    for reasons, status in (
        ({t: mine}, "caught"),
        ({t: mine.replace(entry.url, "https://github.com/x/y/issues/1")}, "missed"),
        ({t: mine.replace(f" {entry.value_divergence} ", " another-region ")}, "missed"),
        ({t: f"known bug x ({entry.url}): why"}, "missed"),
        ({}, "missed"),
    ):
        clean = SuiteRun(entry.selection, None, 0, {t: "skipped", "t2": "passed"}, "", reasons=reasons)
        assert evaluate(entry, p, clean, None).status == status, reasons

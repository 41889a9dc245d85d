"""conformance.execution.BatchScheduling: xdist's scope distribution of a run with compiled
modes (a compiled batch is one scope), which forgets a scope once its tests have finished
(benchmarks/bench_scheduler.py measures why). Replayed on fake workers: every test runs once,
a batch on one worker, and a worker that dies hands its unfinished tests to another."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_scheduler import certification_ids, simulate

from conformance.categories.modes import batch_scope
from conformance.execution import BatchScheduling

IDS = certification_ids(1200)


def test_every_test_runs_once_and_a_batch_on_one_worker() -> None:
    ran, crashed = simulate(BatchScheduling, IDS, workers=2)
    assert crashed is None and sorted(t for _, t in ran) == sorted(IDS)
    workers_of: dict[str, set[str]] = {}
    for worker, test in ran:
        workers_of.setdefault(batch_scope(test), set()).add(worker)
    batches = {scope: w for scope, w in workers_of.items() if not scope.startswith("conformance/")}
    assert len(batches) == 12 and all(len(w) == 1 for w in batches.values()), batches
    assert len({w for ws in workers_of.values() for w in ws}) == 2


def test_a_dead_worker_hands_its_unfinished_tests_to_another() -> None:
    ran, crashed = simulate(BatchScheduling, IDS, workers=2, crash_after=500)
    tests = [t for _, t in ran]
    assert crashed is not None and set(tests) == set(IDS), sorted(set(IDS) - set(tests))[:5]
    again = {t for t in tests if tests.count(t) > 1}
    assert again <= {crashed}, sorted(again)[:5]  # a finished test never runs again

"""The xdist controller's scheduling cost in a certification with compiled modes.

A run with ``--mode`` other than eager distributes with
:class:`conformance.execution.BatchScheduling` (xdist's scope distribution, a compiled batch
being one scope). Most tests are a scope of their own, and xdist's scope scheduler counted, at
each test's end, the pending tests of every scope the worker had been given. This replays a
run's scheduling without workers: the tests of a certification's size (export's batches and
single tests, as ``batch_scope`` splits them) handed out to ``-n`` fake workers and finished one
by one, with xdist's bookkeeping of those scopes and with the suite's, and prints the controller's
seconds for each.

    python benchmarks/bench_scheduler.py [--tests 10800] [-n 2]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from xdist.scheduler import LoadScopeScheduling

from conformance.categories.modes import batch_scope
from conformance.execution import BatchScheduling


class FakeWorker:
    """What a scheduler asks of an xdist worker: tests to run, in the order sent."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.queue: list[int] = []

    def send_runtest_some(self, indices: Sequence[int]) -> None:
        self.queue.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def certification_ids(n: int) -> list[str]:
    """Node ids shaped as a certification's: every fifth a compiled mode's test (12 batches:
    compile, export, aoti x dtype x inputs), the rest single tests."""
    batches = [
        (p, d, i)
        for p in ("compile", "export", "aoti")
        for d in ("float16", "bfloat16")
        for i in ("float32", "lower")
    ]
    out = []
    for k in range(n):
        if k % 5 == 0:
            p, d, i = batches[(k // 5) % len(batches)]
            out.append(f"conformance/test_modes.py::test_mode_matches_eager[{p}-aten::op{k}-{d}-{i}]")
        else:
            out.append(f"conformance/test_op_policy.py::test_op_policy[cpu-float16-fp32-aten::op{k}]")
    return out


def simulate(
    scheduler: type[LoadScopeScheduling], ids: list[str], workers: int, crash_after: int | None = None
) -> tuple[list[tuple[str, str]], str | None]:
    """Runs ``ids`` through ``scheduler`` on fake workers, round robin, one test at a time;
    with ``crash_after``, the first worker dies after that many tests of the run. Returns
    (worker, test) for each test run, in order, and the test the dead worker was running."""
    config: Any = SimpleNamespace(
        getvalue=lambda name: [f"{workers}*popen"] if name == "tx" else None,
        option=SimpleNamespace(loadscopereorder=False),
    )
    sched = scheduler(config, log=SimpleNamespace(loadscopesched=lambda *args: None))
    nodes = [FakeWorker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, ids)
    sched.schedule()
    ran: list[tuple[str, str]] = []
    crashed = None
    while any(n.queue for n in nodes if n in sched.assigned_work):
        for node in [n for n in nodes if n in sched.assigned_work and n.queue]:
            if crash_after is not None and crashed is None and len(ran) >= crash_after and node is nodes[0]:
                crashed = sched.remove_node(node)
                node.queue.clear()
                continue
            index = node.queue.pop(0)
            ran.append((node.gateway.id, ids[index]))
            sched.mark_test_complete(node, index)
    return ran, crashed


class XdistScopes(LoadScopeScheduling):
    """The suite's scopes on xdist's own bookkeeping (BatchScheduling before 2026-11-28)."""

    def _split_scope(self, nodeid: str) -> str:
        return batch_scope(nodeid)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tests", type=int, default=10_800)
    ap.add_argument("-n", type=int, default=2, dest="workers")
    a = ap.parse_args()
    ids = certification_ids(a.tests)
    for cls in (XdistScopes, BatchScheduling):
        start = time.process_time()
        ran, _ = simulate(cls, ids, a.workers)
        took = time.process_time() - start
        assert sorted(t for _, t in ran) == sorted(ids)
        print(f"{cls.__name__:20s} {a.tests} tests, {a.workers} workers: {took:.2f} s of CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

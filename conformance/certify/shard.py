"""``--certify-shard K/N``: a deterministic 1/N of a certification run, balanced by measured cost.

Every process of a sharded run (the controller and each xdist worker, on whatever machine)
computes the same assignment from the same inputs: the collected tests in collection order
and the cost table. Nothing depends on the host, the hash seed or the time.

* **Units.** A compiled batch (:func:`conformance.categories.modes.batch_scope`: one graph for all
  its tests, the unit xdist's scope scheduling hands to one worker) is one unit, so a shard
  compiles exactly the graph an unsharded run compiles; every other test is a unit of its own.
* **Cost.** Each test costs the seconds the cost table gives its key (:func:`cost_key`: its
  test function, with its mode where it has one, or its batch), else the table's default for
  its mode (a mode as ids name it: ``compile`` for aot_eager, ``compile-inductor``...), plus
  the table's per-test overhead (dispatch and recording). A unit costs the sum of its tests'
  costs, in whole microseconds (integer sums: the same on every machine).
* **Assignment.** The longest-processing-time rule: units from the costliest (ties: the first
  collected), each to the shard with the least cost so far (ties: the lowest index).

The cost table ships with the suite (``costs.json`` beside this module), measured by
``benchmarks/bench_certify_costs.py``; ``--certify-costs FILE`` gives another one measured the
same way. A shard records its own tests in ``shard.json`` and the full run's list in
``collected.json``; ``autocast-spec merge-bundles`` (:mod:`.merge`) puts the shards together.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.categories.modes import batch_scope

from .identity import CollectedTest, collected_test

COSTS = Path(__file__).with_name("costs.json")
ANY_MODE = "*"  # the default cost of a test whose mode the table does not know
SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardError(Exception):
    """A --certify-shard or --certify-costs the run cannot use: one line saying why and what to do."""


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    m = SHARD.match(text)
    if m is None:
        raise ShardError(f"--certify-shard {text!r}: give K/N, e.g. 1/4 (the K-th of N shards)")
    index, count = int(m[1]), int(m[2])
    if not 1 <= index <= count:
        raise ShardError(f"--certify-shard {text}: K must be between 1 and N")
    return Shard(index, count)


@dataclass(frozen=True)
class CostTable:
    costs: Mapping[str, float]  # cost key -> seconds per test
    defaults: Mapping[str, float]  # mode key (or ANY_MODE) -> seconds per test
    overhead_s: float  # per test, beyond its own duration
    source: str  # where it was read from
    sha256: str

    def micros(self, key: str, mode: str) -> int:
        seconds = self.costs.get(key)
        if seconds is None:
            seconds = self.defaults.get(mode, self.defaults[ANY_MODE])
        return round((seconds + self.overhead_s) * 1e6)


def load_costs(path: Path | None = None) -> CostTable:
    """The cost table at ``path`` (the bundled one by default)."""
    source = str(path) if path else "bundled"
    path = path or COSTS
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
        costs = {str(k): float(v) for k, v in data["costs"].items()}
        defaults = {str(k): float(v) for k, v in data["default_s"].items()}
        overhead = float(data["overhead_s"])
    except OSError as e:
        raise ShardError(f"--certify-costs {path}: cannot be read ({e.strerror})") from None
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ShardError(
            f"--certify-costs {path}: not a cost table ({type(e).__name__}: {e}); "
            "write one with benchmarks/bench_certify_costs.py"
        ) from None
    if ANY_MODE not in defaults:
        raise ShardError(f"--certify-costs {path}: default_s has no {ANY_MODE!r} entry (the fallback)")
    return CostTable(costs, defaults, overhead, source, hashlib.sha256(raw).hexdigest())


def cost_key(test: CollectedTest) -> str:
    """``conformance/test_x.py::test_fn`` (eager), ``...::test_fn[script]``, a compiled batch
    (``export-bfloat16-float32``, ``compile-inductor-bfloat16-lower``)."""
    scope = batch_scope(test.id)
    if scope == test.id:
        fn = test.id.split("[", 1)[0]
        scope = fn if test.mode == "eager" else f"{fn}[{test.mode}]"
    return scope


def test_micros(test: CollectedTest, table: CostTable) -> int:
    """A test's estimated cost in microseconds."""
    return table.micros(cost_key(test), test.mode)


def assign(tests: Sequence[CollectedTest], count: int, table: CostTable) -> list[int]:
    """The shard (0-based) of each test; a batch's tests all get the same one."""
    units: dict[str, list[int]] = {}
    for i, t in enumerate(tests):
        units.setdefault(batch_scope(t.id), []).append(i)
    costed = []
    for first, members in enumerate(units.values()):
        cost = sum(test_micros(tests[i], table) for i in members)
        costed.append((-cost, first, members))
    costed.sort(key=lambda u: (u[0], u[1]))
    loads = [(0, k) for k in range(count)]  # a heap of (cost so far, shard)
    owner = [0] * len(tests)
    for neg_cost, _, members in costed:
        load, k = heapq.heappop(loads)
        for i in members:
            owner[i] = k
        heapq.heappush(loads, (load - neg_cost, k))
    return owner


@dataclass(frozen=True)
class ShardPlan:
    """One shard of a run: which of the collected tests it runs, and its record."""

    shard: Shard
    table: CostTable

    def split(
        self, items: Sequence[pytest.Item], tests: Sequence[CollectedTest]
    ) -> tuple[list[pytest.Item], list[pytest.Item]]:
        """(this shard's items, the others), in collection order."""
        owner = assign(tests, self.shard.count, self.table)
        mine = self.shard.index - 1
        keep = [it for it, k in zip(items, owner, strict=True) if k == mine]
        drop = [it for it, k in zip(items, owner, strict=True) if k != mine]
        return keep, drop

    def estimates(self, tests: Sequence[CollectedTest]) -> list[float]:
        """Each shard's estimated seconds (the sums the assignment balanced)."""
        owner = assign(tests, self.shard.count, self.table)
        sums = [0] * self.shard.count
        for t, k in zip(tests, owner, strict=True):
            sums[k] += test_micros(t, self.table)
        return [round(s / 1e6, 2) for s in sums]

    def record(self, mine: Sequence[CollectedTest], tests: Sequence[CollectedTest]) -> dict[str, Any]:
        """What ``shard.json`` holds: the shard, its tests, how they were chosen."""
        return {
            "index": self.shard.index,
            "count": self.shard.count,
            "tests": [t.id for t in mine],
            "tests_in_run": len(tests),
            "estimated_s": self.estimates(tests),
            "cost_table": {"source": self.table.source, "sha256": self.table.sha256},
        }


class ShardFilter:
    """In a sharded certification's xdist worker: collect the run, keep the shard's tests."""

    def __init__(self, plan: ShardPlan) -> None:
        self.plan = plan

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep, drop = self.plan.split(items, [collected_test(it) for it in items])
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

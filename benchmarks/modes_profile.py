"""pytest plugin for benchmarks/bench_modes.py: where a process of a mode run spends its time.

Loaded with ``-p modes_profile`` (``benchmarks/`` on ``PYTHONPATH``) in the controller and in
every xdist worker. Each process writes ``<dir>/<worker>-<pid>.json`` (``BENCH_MODES_PROFILE``
names the directory) when its session ends:

* ``startup``: seconds from the interpreter's start to the session's (imports, plugins);
* ``collection``: seconds collecting;
* ``groups``: per test group (:func:`group`, read from the node id): tests, wall seconds, and
  the seconds torch's own timers attribute to Dynamo's phases during those tests
  (``torch._dynamo.utils.compilation_time_metrics``, :data:`PHASES`; nested: AOTAutograd's
  holds inductor's, which holds the C++ compiler's; a C++ build in inductor's compile workers
  is not seen, only the wait for it; ``torch._dynamo.reset()`` clears them, which a test's
  delta allows for);
* ``cpu``: the process's user+sys seconds, and its waited-for children's (the C++ compiler);
* ``counters``: Dynamo's counters (graphs, inductor's FX graph cache hits and misses, the
  AOTAutograd cache's bypasses);
* ``batches``: what the suite's batch runner counted (graphs compiled, seconds).

Nothing here changes what a test does; it only reads timers around each test.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

ENV = "BENCH_MODES_PROFILE"
# torch's timer names (compilation_time_metrics) -> the phase this table calls them
PHASES = {
    "_compile.compile_inner": "dynamo (all)",
    "bytecode_tracing": "dynamo trace",
    "create_aot_dispatcher_function": "aot_autograd (all)",
    "compile_fx_inner": "inductor (all)",
    "GraphLowering.run": "inductor lowering",
    "GraphLowering.codegen": "inductor codegen",
    "compile_file": "C++ compile",
    "PyCodeCache.load_by_key_path": "load compiled module",
    "async_compile.wait": "async compile wait",
    "build_guards": "guards",
    "compile_fx_aot": "aoti compile",
}
TEST = re.compile(r"::(?P<test>\w+)(?:\[(?P<param>.*)\])?$")


def group(nodeid: str) -> str:
    """The part of a mode run a test belongs to: a mode's pass, a mode category, or the eager suite."""
    m = TEST.search(nodeid)
    test, param = (m["test"], m["param"] or "") if m else ("", "")
    if test == "test_mode_matches_eager":
        head = param.split("-")
        if head[0] == "compile":
            backend = "inductor" if head[1] == "inductor" else "aot_eager"
            emulate = "emulate_precision_casts" in head[1:3]
            return f"modes compile {backend}" + (" emulate" if emulate else "")
        if head[0] == "export":
            return "modes export decomposed" if head[1] == "decomposed" else "modes export"
        return f"modes {head[0]}"
    if test == "test_region_matches_eager":
        return "regions inductor" if param.startswith("compile-inductor") else "regions aot_eager"
    if test == "test_mode_gradients_match_eager":
        return "mode_gradients inductor" if param.startswith("grad-inductor") else "mode_gradients aot_eager"
    if test == "test_exception_escaping_region_restores_state":
        return "mode_exceptions"
    if test == "test_generated_programs":
        return f"programs {param.split('-')[0]}"
    if test == "test_limitation":
        return "jit limitations"
    return "eager suite"


def _timers() -> dict[str, float]:
    utils = sys.modules.get("torch._dynamo.utils")
    metrics = getattr(utils, "compilation_time_metrics", {}) if utils else {}
    return {name: sum(metrics.get(key, ())) for key, name in PHASES.items()}


class Profile:
    def __init__(self, out: Path, worker: str) -> None:
        self.out, self.worker = out, worker
        self.groups: dict[str, dict[str, float]] = {}
        self.collection = 0.0
        self.startup = time.time() - _process_start()

    @pytest.hookimpl(wrapper=True)
    def pytest_collection(self, session: pytest.Session) -> Generator[None, Any, Any]:
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            self.collection = time.perf_counter() - start

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, Any]:
        before, start = _timers(), time.perf_counter()
        try:
            return (yield)
        finally:
            g = self.groups.setdefault(group(item.nodeid), {"tests": 0, "wall": 0.0})
            g["tests"] += 1
            g["wall"] += time.perf_counter() - start
            for name, value in _timers().items():  # torch._dynamo.reset() clears the timers
                g[name] = g.get(name, 0.0) + (value - before[name] if value >= before[name] else value)

    def pytest_sessionfinish(self) -> None:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        utils = sys.modules.get("torch._dynamo.utils")
        counters = {k: dict(v) for k, v in getattr(utils, "counters", {}).items()} if utils else {}
        batch = sys.modules.get("reference_impl.modes.batch")
        timing = getattr(batch, "TIMING", None)
        record = {
            "worker": self.worker,
            "startup": self.startup,
            "collection": self.collection,
            "groups": self.groups,
            "cpu": {"self": me.ru_utime + me.ru_stime, "children": kids.ru_utime + kids.ru_stime},
            "counters": counters,
            "batches": {"graphs": timing.graphs, "seconds": timing.seconds} if timing else {},
        }
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / f"{self.worker}-{os.getpid()}.json").write_text(json.dumps(record, indent=1))


def _process_start() -> float:
    """The epoch second this process started (Linux: /proc), else now."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line[:5] == "btime"
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, IndexError, ValueError):
        return time.time()


def pytest_configure(config: pytest.Config) -> None:
    out = os.environ.get(ENV)
    if out:
        worker = getattr(config, "workerinput", {}).get("workerid", "controller")
        config.pluginmanager.register(Profile(Path(out), worker), "bench-modes-profile")

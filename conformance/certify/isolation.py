"""Crash and hang isolation: run tests in worker processes that may die.

The coordinator (the pytest process the vendor started) hands a list of test
ids to a worker: a fresh ``python -m pytest`` subprocess with the same options
that runs only those tests and appends one JSON line per event to a file
(``start`` before a test, ``report`` per phase, ``finish`` after teardown),
flushed as it goes. The coordinator tails that file. When the worker dies
(segfault, ``abort()``, ``os._exit``) the test that started but did not finish
is recorded as ``crash``; when one test runs past the time limit the worker's
process group is killed and the test is recorded as ``timeout``. Either way a
new worker resumes with the tests not yet run, so one bad op costs one test,
and every line already written stays written.

Workers are spawned, never forked: a forked child of a process that has
initialized a GPU runtime cannot use the GPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Event = dict[str, Any]

# How long a fresh worker may take to import torch and collect before its first test.
STARTUP_TIMEOUT_S = 600.0
POLL_S = 0.02


class WorkerError(Exception):
    """A worker could not run any test (it died or hung before the first one)."""


@dataclass
class Lost:
    """A test whose worker died or was killed while it ran."""

    nodeid: str
    status: str  # "crash" | "timeout"
    detail: str
    duration: float
    reports: list[dict[str, Any]] = field(default_factory=list)  # phases that did finish


class JsonlTail:
    """Read complete lines appended to a file since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def read_new(self) -> list[Event]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *lines, self.partial = data.split(b"\n")
        out = []
        for line in lines:
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a torn line from a killed writer
        return out


class JsonlWriter:
    """Append-only JSON lines, flushed after each line so a crash loses nothing written."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = path.open("a", encoding="utf-8")

    def write(self, event: Event) -> None:
        self._f.write(json.dumps(event, sort_keys=True) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"the worker process was killed by {name}"
    return f"the worker process exited with status {rc}"


def log_tail(path: Path, chars: int = 3000) -> str:
    """The end of a worker's output; from Python's fatal-error report when there is one."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    fatal = text.rfind("Fatal Python error")
    if fatal >= 0:
        return text[fatal : fatal + chars]
    return text[-chars:]


@dataclass
class WorkerPlan:
    """How to start a worker: ``command(ids_file, events_file)`` gives its argv."""

    command: Callable[[Path, Path], list[str]]
    workdir: Path  # where id lists, event files and logs go
    cwd: Path
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class _Worker:
    n: int
    proc: subprocess.Popen[bytes]
    ids_file: Path
    events_file: Path
    log_file: Path


def _spawn(plan: WorkerPlan, n: int) -> _Worker:
    """Start worker ``n``; it imports and collects, then waits for its ids file to appear."""
    ids_file = plan.workdir / f"worker-{n}.ids"
    events_file = plan.workdir / f"worker-{n}.jsonl"
    log_file = plan.workdir / f"worker-{n}.log"
    with log_file.open("wb") as log:
        proc = subprocess.Popen(
            plan.command(ids_file, events_file),
            cwd=plan.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **plan.env},
            start_new_session=True,  # its own process group: a timeout kills all of it
        )
    return _Worker(n, proc, ids_file, events_file, log_file)


def _hand_over(w: _Worker, ids: Sequence[str]) -> None:
    tmp = w.ids_file.with_suffix(".ids.tmp")
    tmp.write_text("\n".join(ids) + "\n", encoding="utf-8")
    tmp.replace(w.ids_file)  # atomic: the waiting worker never reads half a list


def run_isolated(
    nodeids: Sequence[str],
    plan: WorkerPlan,
    on_event: Callable[[Event], None],
    on_lost: Callable[[Lost], None],
) -> int:
    """Run ``nodeids`` in as many successive workers as crashes require.

    A spare worker is always started ahead (it imports torch and collects while
    the current one runs), so a crash costs one test, not a restart. ``on_event``
    receives every start/report/finish event as it is read; ``on_lost`` each test
    recorded as crash or timeout. Returns the number of workers that ran tests.
    """
    remaining = list(nodeids)
    plan.workdir.mkdir(parents=True, exist_ok=True)
    used = 0
    spare = _spawn(plan, 1)
    w = spare
    try:
        while remaining:
            w = spare
            used += 1
            _hand_over(w, remaining)
            spare = _spawn(plan, w.n + 1)
            finished, lost_one, started_any = _watch(
                w.proc, w.events_file, w.log_file, plan, on_event, on_lost
            )
            if not started_any:
                raise WorkerError(
                    f"worker {w.n} ran no test ({describe_exit(w.proc.returncode)}); its output:\n"
                    + log_tail(w.log_file)
                )
            done = finished | ({lost_one} if lost_one else set())
            remaining = [n for n in remaining if n not in done]
            if lost_one is None and remaining:
                # The worker ended normally but skipped some ids (e.g. not collected there).
                for n in remaining:
                    on_lost(Lost(n, "crash", "the worker ended without running this test", 0.0))
                remaining = []
    finally:  # also on an interrupt: no worker outlives the coordinator's bundle
        if w.proc.poll() is None:
            _kill(w.proc)
        _kill(spare.proc)
        for f in (spare.ids_file, spare.events_file, spare.log_file):
            f.unlink(missing_ok=True)
    return used


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def _watch(
    proc: subprocess.Popen[bytes],
    events_file: Path,
    log_file: Path,
    plan: WorkerPlan,
    on_event: Callable[[Event], None],
    on_lost: Callable[[Lost], None],
) -> tuple[set[str], str | None, bool]:
    tail = JsonlTail(events_file)
    finished: set[str] = set()
    current: str | None = None
    current_reports: list[dict[str, Any]] = []
    started_at = 0.0
    spawned = time.monotonic()
    started_any = False
    timed_out = False

    def drain() -> None:
        nonlocal current, started_at, started_any
        for ev in tail.read_new():
            kind = ev.get("event")
            if kind == "start":
                current, started_at, started_any = ev["nodeid"], time.monotonic(), True
                current_reports.clear()
            elif kind == "report":
                current_reports.append(ev["report"])
            elif kind == "finish":
                finished.add(ev["nodeid"])
                current = None
            on_event(ev)

    while True:
        drain()
        rc = proc.poll()
        if rc is not None:
            drain()
            break
        now = time.monotonic()
        if current is not None and now - started_at > plan.timeout_s:
            _kill(proc)
            drain()
            timed_out = current is not None
            break
        if not started_any and now - spawned > STARTUP_TIMEOUT_S:
            _kill(proc)
            break
        time.sleep(POLL_S)

    if current is None:
        return finished, None, started_any
    duration = time.monotonic() - started_at
    if timed_out:
        lost = Lost(
            current,
            "timeout",
            f"the test ran longer than the {plan.timeout_s:g} s limit (--test-timeout); "
            "its worker was killed",
            duration,
            list(current_reports),
        )
    else:
        lost = Lost(
            current,
            "crash",
            f"{describe_exit(proc.returncode)} while this test ran\n"
            f"--- last output:\n{log_tail(log_file, 1500)}",
            duration,
            list(current_reports),
        )
    on_lost(lost)
    return finished, current, started_any


def python_pytest() -> list[str]:
    return [sys.executable, "-m", "pytest"]

"""Crash and hang isolation: certification runs on pytest-xdist and pytest-timeout.

A certification always runs its tests in xdist workers: as many as ``-n``
says, one when ``-n`` is not given (or is 0). The controller collects, hands
out the tests and records what the workers report (:mod:`.recorder`).

* **crash**: a worker that dies (``abort()``, a segfault, ``os._exit``) is
  replaced by xdist, which reports the test it was running; the controller
  records it as ``crash``, with the fatal-error report faulthandler wrote to the
  worker's log. The other tests of that worker go to the remaining workers.
* **timeout**: pytest-timeout with the ``thread`` method and the
  ``--test-timeout`` limit (setup, call and teardown together). Its timer is
  started through pytest-timeout's ``pytest_timeout_set_timer`` hook so that,
  when it fires, the worker first writes a timeout line and the stacks to its log;
  then pytest-timeout ends the process. The controller reads the line and
  records ``timeout``. A hang that holds the GIL starves that timer thread, so
  faulthandler's watchdog (a C thread) ends the worker
  :data:`BACKSTOP_GRACE_S` later, also recorded as ``timeout``.

Each worker writes ``logs/<worker id>.log`` in the bundle: one start line per
test, then only what explains a lost test.
"""

from __future__ import annotations

import faulthandler
import os
import re
import sys
import threading
import traceback
from pathlib import Path
from typing import TextIO

import pytest
from pytest_timeout import Settings, is_debugging, timeout_timer

from autocast_spec.imports import native_message

from .bundle import LOGS
from .identity import option

START_MARK = "certify: start "
TIMEOUT_MARK = "certify: timeout "
# faulthandler.dump_traceback_later's header: "Timeout (0:00:07)!"
WATCHDOG_TIMEOUT = re.compile(r"^Timeout \(\d+:\d\d:\d\d(\.\d+)?\)!$", re.MULTILINE)
BACKSTOP_GRACE_S = 2.0
# xdist has no "unlimited": each crash costs one test, so restarts stay below the
# number of tests; a worker that dies before it has collected stops the run (recorder).
UNLIMITED_RESTARTS = "1000000"
WORKER_ROOT = "certify_root"  # the key of the bundle directory in xdist's workerinput

# Options of an invocation that say how to run, not what: left out of the recorded
# worker arguments that verify-bundle replays. name -> takes a value.
RUN_ONLY_OPTIONS = {
    "--certify": True,
    "--certify-overwrite": False,
    "--test-timeout": True,
    # a shard replays as the whole run (merge-bundles puts the shards together)
    "--certify-shard": True,
    "--certify-costs": True,
    # where compiled code is cached: how fast, not what (shards may each restore their own)
    "--compile-cache": True,
    "--junitxml": True,
    "--junit-xml": True,
    "-n": True,
    "--numprocesses": True,
    "--maxprocesses": True,
    "--max-worker-restart": True,
    "--dist": True,
    "--tx": True,
    "-d": False,
}
_USER_TIMEOUT = pytest.StashKey[list[str]]()


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def worker_root(config: pytest.Config) -> Path | None:
    """The bundle directory, in a certification's worker (None elsewhere)."""
    root = getattr(config, "workerinput", {}).get(WORKER_ROOT)
    return Path(root) if root else None


def log_path(root: Path, worker_id: str) -> Path:
    return root / LOGS / f"{worker_id}.log"


def prepare_options(config: pytest.Config, timeout: float) -> None:
    """Before xdist and pytest-timeout read their options (``pytest_cmdline_main``).

    The controller gets one worker when ``-n`` is not given; every process gets
    pytest-timeout's thread method with the certification's limit. What the user
    gave for pytest-timeout is kept aside for :func:`refusals`.
    """
    if not is_worker(config) and hasattr(config.option, "numprocesses"):
        if not config.option.numprocesses:
            config.option.numprocesses = 1
        if config.option.maxworkerrestart is None:
            config.option.maxworkerrestart = UNLIMITED_RESTARTS
    if hasattr(config.option, "timeout"):
        given = {"--timeout": config.option.timeout, "--timeout-method": config.option.timeout_method}
        config.stash[_USER_TIMEOUT] = [name for name, v in given.items() if v is not None]
        config.option.timeout = timeout
        config.option.timeout_method = "thread"


def no_workers(config: pytest.Config) -> None:
    """A run that only collects (``--certify-list``): no xdist workers whatever ``-n`` says."""
    if hasattr(config.option, "numprocesses"):
        config.option.numprocesses = 0


def refusals(config: pytest.Config) -> list[str]:
    """What keeps a certification from isolating its tests: missing plugins, conflicting options."""
    out = []
    if not config.pluginmanager.hasplugin("xdist"):
        out.append("pytest-xdist is not loaded (pip install pytest-xdist; drop -p no:xdist)")
    if not config.pluginmanager.hasplugin("timeout"):
        out.append("pytest-timeout is not loaded (pip install pytest-timeout; drop -p no:timeout)")
    if option(config, "dist") == "each":
        out.append("drop --dist each (it runs every test in every worker)")
    for name in config.stash.get(_USER_TIMEOUT, []):
        out.append(f"drop {name} (the limit is --test-timeout)")
    if option(config, "session_timeout"):
        out.append("drop --session-timeout (it stops the run)")
    return out


class WorkerLog:
    """In a certification's worker: the log that tells the controller why a test was lost."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file: TextIO = path.open("a", encoding="utf-8")

    def note(self, line: str) -> None:
        self.file.write(line + "\n")
        self.file.flush()

    def pytest_sessionstart(self) -> None:
        faulthandler.enable(file=self.file, all_threads=False)  # after pytest's own set-up
        # native code writes its last words (std::terminate's "what():") to file descriptor 2:
        # into this log, where lost_test finds them (pytest captures sys.stderr only: .isolation)
        sys.stderr.flush()
        os.dup2(self.file.fileno(), 2)

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.note(START_MARK + nodeid)

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Settings) -> bool:
        """pytest-timeout's thread method, with a line in the log before it ends the process."""
        faulthandler.dump_traceback_later(settings.timeout + BACKSTOP_GRACE_S, exit=True, file=self.file)
        timer = threading.Timer(settings.timeout, self._expire, (item, settings))
        timer.name = f"certify timeout {item.nodeid}"

        def cancel() -> None:
            timer.cancel()
            timer.join()
            faulthandler.cancel_dump_traceback_later()

        item.cancel_timeout = cancel  # type: ignore[attr-defined]  # pytest-timeout's cancel hook calls it
        timer.start()
        return True

    def _expire(self, item: pytest.Item, settings: Settings) -> None:
        if not settings.disable_debugger_detection and is_debugging():
            return
        frame = sys._current_frames().get(threading.main_thread().ident or 0)
        stack = traceback.format_list(traceback.extract_stack(frame)[::-1]) if frame else []
        self.note(
            f"{TIMEOUT_MARK}{item.nodeid}: ran past {settings.timeout:g} s, in (most recent call first):"
        )
        self.note("".join(stack))
        timeout_timer(item, settings)  # pytest-timeout's own end: stacks to the terminal, os._exit(1)


class QuickExit:
    """In a certification's worker: the process ends as soon as its session is over.

    By ``pytest_unconfigure`` the worker has sent its last report and its ``workerfinished``
    event (xdist writes them to the pipe as it sends them), and its log is flushed line by line.
    What is left is the interpreter's own finalization (freeing torch's and the suite's objects,
    torch's static destructors): about 3 s of CPU, with the controller waiting for it before it
    writes the bundle. ``os._exit`` skips it, and with it the worker's ``atexit`` handlers,
    which a certification does not rely on (a worker that crashes runs none either). Plain runs
    end as usual."""

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def lost_test(log: Path, worker: str, nodeid: str, limit: float) -> tuple[str, str]:
    """(``timeout`` or ``crash``, detail) for a test whose worker died; read from the worker's log."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    start = text.rfind(f"{START_MARK}{nodeid}\n")
    section = text[start:].split("\n", 1)[-1] if start >= 0 else ""
    if TIMEOUT_MARK in section:
        status = "timeout"
        head = (
            f"the test ran longer than the {limit:g} s limit (--test-timeout); pytest-timeout ended {worker}"
        )
    elif WATCHDOG_TIMEOUT.search(section):
        status = "timeout"
        head = (
            f"the test ran longer than the {limit:g} s limit (--test-timeout) holding the GIL; "
            f"faulthandler's watchdog ended {worker}"
        )
    else:
        status = "crash"
        fatal = section.find("Fatal Python error")
        why = section[fatal:].split("\n", 1)[0] if fatal >= 0 else "no fatal-error report in its log"
        native = native_message(section[: fatal if fatal >= 0 else len(section)])
        head = f"worker {worker} died while this test ran ({why})" + (f": {native}" if native else "")
    return status, f"{head}\n--- {log.name}:\n{section[:6000]}"

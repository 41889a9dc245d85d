"""Plain runs of a vendor's backend: its tests in a pytest-xdist worker, a crash one test's status.

A vendor's package (its device file names it: a ``vendor:`` block) runs native code of its own
in the suite's process, and that code can end the process: ``std::terminate`` in a kernel, a
segfault. A plain run (no ``--certify``) of such a backend, with the native autocast, runs its
tests in one xdist worker, as a certification does, unless ``-n`` says otherwise (``-n 0``:
in-process, as before). A worker that dies costs the test it was running: xdist replaces it,
and that test is reported failed as ``[crash]``, with what the worker's log holds: the native
(C++) message the process printed before it ended (``terminate called after throwing ...
what(): ...``) and the fatal-error report faulthandler wrote. Any other plain run given ``-n``
gets the same report for a lost test; a run without a vendor package (cpu, cuda, a ``-p``
plugin's backend) stays in-process, at no cost.

In every worker that keeps such a log (a plain run's, and a certification's), the worker's file
descriptor 2 is that log and pytest captures ``sys.stderr`` only (``--capture=sys`` where fd
capture was asked): fd capture would hold a native message in a temporary file that dies with
the process.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from autocast_spec.files import names_vendor

from .identity import option
from .workers import UNLIMITED_RESTARTS, is_worker, log_path, lost_test

NATIVE_LOG_DIR = "native_log_dir"  # xdist workerinput: where a plain run's worker logs go
_LOGGED = "AUTOCAST_CONFORMANCE_LOGGED_WORKER"  # set in the controller's environment for its workers
_DIR = pytest.StashKey[Path]()  # the controller's: the directory of its workers' logs


def declares_vendor(config: pytest.Config) -> bool:
    """Does the run's backend come from a vendor's package, run natively (not the reference)?"""
    backend = option(config, "backend")
    if not backend or (option(config, "implementation") or "native") != "native":
        return False
    paths = [Path(p) for p in option(config, "spec") or ()]
    try:
        return names_vendor(backend, [p for p in paths if p.exists()] or None)
    except Exception:  # an unreadable file: the target's resolution reports it properly
        return False


def _plain_controller(config: pytest.Config) -> bool:
    return not (
        is_worker(config)
        or option(config, "certify")
        or option(config, "certify_list")
        or option(config, "collectonly")
        or not config.pluginmanager.hasplugin("xdist")
    )


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, Any, Any]:
    """Before xdist reads its options: a vendor's backend in one worker, restarted after every
    crash; the workers of any plain xdist run keep a log for a lost test."""
    if _plain_controller(config):
        if config.option.numprocesses is None and not option(config, "usepdb") and declares_vendor(config):
            config.option.numprocesses = 1
            if config.option.maxworkerrestart is None:
                config.option.maxworkerrestart = UNLIMITED_RESTARTS
        if config.option.numprocesses:
            logs = Path(tempfile.mkdtemp(prefix="autocast-conformance-workers-"))
            config.stash[_DIR] = logs
            config.add_cleanup(lambda: shutil.rmtree(logs, ignore_errors=True))
    if option(config, "certify") or _DIR in config.stash:
        os.environ[_LOGGED] = "1"  # read by the workers before their capture starts
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> Generator[None, Any, Any]:
    """In a logged worker, before pytest starts capturing: ``sys`` capture instead of ``fd``."""
    ns = early_config.known_args_namespace
    if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get(_LOGGED) and ns.capture == "fd":
        ns.capture = "sys"
    return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if _DIR in node.config.stash:
        node.workerinput[NATIVE_LOG_DIR] = str(node.config.stash[_DIR])


def worker_log_root(config: pytest.Config) -> Path | None:
    """In a plain run's isolating worker, the directory its log goes to (None elsewhere)."""
    root = getattr(config, "workerinput", {}).get(NATIVE_LOG_DIR)
    return Path(root) if root else None


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: Any) -> None:
    """A plain run's lost test: ``[crash]`` with the worker log's fatal-error report and native message."""
    config = report.node.config  # xdist puts the worker on its crash report
    if _DIR not in config.stash:
        return  # a certification records its own (recorder.Recorder)
    wid = report.node.gateway.id
    status, detail = lost_test(log_path(config.stash[_DIR], wid), wid, crashitem, float("inf"))
    report.longrepr = f"[{status}] {detail}"

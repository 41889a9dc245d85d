"""pytest sub-plugin: the execution modes of a run (listed in ``conformance.plugin``).

It adds

* ``--mode eager|script|trace|compile|export|aoti`` (repeatable; default ``eager``; ``aoti``
  stops the run with a usage error where AOTInductor or a C++ compiler is missing),
* ``--compile-backend aot_eager|inductor|...`` (repeatable, each a pass of its own; default
  ``aot_eager``: no C++ toolchain),
* ``--compile-cache DIR`` (one inductor cache for the run, shared by its workers),
* the distribution of a compiled run's batches over pytest-xdist workers,
* one share of the cores per xdist worker (:func:`share_cores`), and
* a terminal-summary line counting the declared divergences reported xfail.

The mode categories (``conformance/categories/modes.py``, ``regions.py``,
``mode_gradients.py``, ``mode_exceptions.py``) generate their cases from the target's modes.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch
from xdist.scheduler import LoadScopeScheduling

from reference_impl.modes.aoti import unavailable
from reference_impl.modes.batch import TIMING, use_cache_dir
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND, MODES

from .categories import mode_gradients
from .categories.modes import SELECTED, batch_scope
from .errors import usage_error
from .kit.case import Case
from .kit.divergences import DECLARED, DECLARED_VALUES
from .kit.verdict import DeclarationNotObserved

SUITE_DIR = Path(__file__).resolve().parent  # the suite's test modules


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("autocast-modes", "autocast execution modes")
    group.addoption(
        "--mode",
        action="append",
        choices=MODES,
        default=None,
        help="run the op policy checks through this mode (repeatable; default: eager)",
    )
    group.addoption(
        "--compile-backend",
        action="append",
        default=None,
        help="torch.compile backend for --mode compile (repeatable: each backend is a pass of its own; "
        f"default {DEFAULT_COMPILE_BACKEND}; inductor needs a C++ compiler)",
    )
    group.addoption(
        "--programs",
        type=int,
        default=None,
        metavar="N",
        help="generated programs per case of the programs category (default: each pass's own budget; "
        "a larger N is a campaign: random draws, and what fails is saved to .hypothesis/autocast-programs)",
    )
    group.addoption(
        "--programs-shrink",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long Hypothesis may shrink a failing generated program (default 120; 0: as drawn)",
    )
    group.addoption(
        "--compile-cache",
        default=None,
        metavar="DIR",
        help="the compile cache for the run, shared by its workers: inductor's FX graph cache and "
        "compiled code, the AOTInductor packages (default: a new temporary directory; "
        "give the same DIR again, or restore it in CI, for a warm run)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """One inductor cache directory per run, shared by its workers (set before they start)."""
    modes = selected_modes(config)
    if "aoti" in modes and (why := unavailable()):
        usage_error(f"--mode aoti: {why}")
    chosen = cache_option(config)
    if any(m != "eager" for m in modes):
        use_cache_dir(chosen)


def share_cores(session: pytest.Session) -> None:
    """In a pytest-xdist worker that runs the suite's tests, torch's intra-op threads are the cores
    over the workers, unless ``OMP_NUM_THREADS`` says otherwise. torch's default is a thread per
    core in every worker, and with more threads than cores its OpenMP threads spin waiting for one
    another (docs/conformance.md, "Workers and threads": the figures). Another project's tests,
    in an environment where this plugin is installed, keep torch's default."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not hasattr(session.config, "workerinput") or not workers or "OMP_NUM_THREADS" in os.environ:
        return
    if any(Path(str(item.path)).resolve().parent == SUITE_DIR for item in session.items):
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        torch.set_num_threads(max(1, cores // max(1, int(workers))))  # macOS has no sched_getaffinity


def cache_option(config: pytest.Config) -> str | None:
    """``--compile-cache DIR`` made (parents too) and checked writable, as an absolute path (the
    workers inherit it), before anything compiles; a directory that cannot be written stops the
    run (exit 2): a cache that silently stays cold would waste the run's time."""
    chosen = config.getoption("--compile-cache", default=None)
    if chosen is None:
        return None
    path = Path(chosen).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        usage_error(
            f"--compile-cache {chosen}: not a directory this run can write to "
            f"({exc.strerror or exc}); give a writable directory (it is created if missing)"
        )
    return str(path.resolve())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With only eager selected there is nothing to compare: drop the per-op mode checks."""
    if any(m != "eager" for m in selected_modes(config)):
        return
    dropped = [i for i in items if getattr(i, "originalname", "") == "test_mode_matches_eager"]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``-n``: each compiled batch's tests go to one worker (one compile per batch, not one
    per worker); every other test is its own scope, as in xdist's ``load`` distribution."""
    if config.getoption("dist", default="no") != "load" or not any(
        m != "eager" for m in selected_modes(config)
    ):
        return None
    return BatchScheduling(config, log)


class BatchScheduling(LoadScopeScheduling):
    """xdist's scope distribution, a scope being a compiled batch (:func:`batch_scope`)."""

    def _split_scope(self, nodeid: str) -> str:
        return batch_scope(nodeid)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        """xdist's, with a finished scope forgotten: at each test's end xdist counts the pending
        tests of every scope the worker was ever given, and here most tests are a scope of their
        own (tests x scopes: 16 million counts, 10 s of the controller's 90 in a profiled
        certification of 6,500 tests). Nothing reads a finished scope: what is pending, and what
        a crashed worker hands back, are the unfinished ones."""
        nodeid = self.registered_collections[node][item_index]
        scope = self._split_scope(nodeid)
        work = self.assigned_work[node]
        work[scope][nodeid] = True
        if all(work[scope].values()):
            del work[scope]
        self._reschedule(node)


def pytest_collection_finish(session: pytest.Session) -> None:
    """A compiled batch (of ``modes``, of ``mode_gradients``) holds the selected cases only
    (``-k`` picks one op: one small graph). A worker that runs them takes its share of the cores."""
    share_cores(session)
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        case = callspec.params.get("case") if callspec is not None else None
        if isinstance(case, Case) and case.category == "modes":
            SELECTED.add(case.id)
        elif isinstance(case, Case) and case.category == "mode_gradients":
            mode_gradients.SELECTED.add(case.id)


def selected_modes(config: pytest.Config) -> tuple[str, ...]:
    chosen = config.getoption("--mode", default=None) or ["eager"]
    return tuple(dict.fromkeys(chosen))


def compile_backends(config: pytest.Config) -> tuple[str, ...]:
    chosen = config.getoption("--compile-backend", default=None) or [DEFAULT_COMPILE_BACKEND]
    return tuple(dict.fromkeys(chosen))


def declared_counts(terminalreporter: Any) -> dict[str, int]:
    """Per mode, the xfailed reports of declared divergences (read in the xdist controller too)."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("xfailed", []):
        reason = str(getattr(report, "wasxfail", ""))
        for prefix in (DECLARED, DECLARED_VALUES):
            if reason.startswith(prefix):
                mode = reason.removeprefix(prefix).split(" ", 1)[0]
                counts[mode] = counts.get(mode, 0) + 1
    return counts


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    modes = [m for m in selected_modes(config) if m != "eager"]
    if not modes:
        return
    counts = declared_counts(terminalreporter)
    parts = ", ".join(f"{m} {counts.get(m, 0)}" for m in modes)
    terminalreporter.write_sep("-", "autocast execution modes")
    terminalreporter.write_line(
        "declared divergences from eager autocast (mode_divergences of spec/jit.yaml and "
        f"spec/compiled.yaml, value_divergences of spec/compiled.yaml), reported xfail: {parts}"
    )
    unseen = [
        w
        for w in terminalreporter.stats.get("warnings", [])
        if DeclarationNotObserved.__name__ in str(w.message)
    ]
    if unseen:
        terminalreporter.write_line(
            f"declarations this run did not observe: {len(unseen)} (DeclarationNotObserved warnings above)"
        )
    if "compile" in modes:
        terminalreporter.write_line(f"torch.compile backends: {', '.join(compile_backends(config))}")
    if {"compile", "aoti"} & set(modes) and TIMING.graphs:  # this process compiled (not xdist's controller)
        terminalreporter.write_line(
            f"compiled {TIMING.graphs} graphs in {TIMING.seconds:.1f} s (first calls, compile included)"
        )

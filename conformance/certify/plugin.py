"""pytest sub-plugin for vendor certification.

Options:

``--expectations FILE``  apply a vendor's expectations (skip, xfail, not-supported, waiver)
``--certify DIR``        run everything in isolated workers and write a bundle to DIR
``--certify-overwrite``  allow --certify to replace a non-empty DIR
``--test-timeout S``     per-test limit under --certify (default 300 s); past it: ``timeout``

Three roles, one per process:

* in-process (no --certify): expectations change outcomes; stale entries are printed;
* coordinator (--certify): checks the options, collects, writes the test list,
  runs the tests through :mod:`.isolation` workers, writes the bundle;
* worker (internal ``--certify-worker``): runs the ids it is given and streams
  events to the coordinator.

A fourth internal mode, ``--certify-list FILE``, writes the collected test list
and exits; ``autocast-spec verify-bundle`` uses it to regenerate the list.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Generator, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from autocast_spec.model import Policy, Spec
from autocast_spec.problems import SpecError, SpecProblem
from conformance.errors import usage_error
from conformance.registry import category_names

from . import bundle as B
from .expectations import (
    EMPTY,
    Expectation,
    Expectations,
    Failure,
    load_expectations,
    mandatory_violations,
    other_device_entries,
    stale_entries,
    status_of,
)
from .isolation import JsonlWriter, Lost, WorkerError, WorkerPlan, python_pytest, run_isolated

DEFAULT_TIMEOUT_S = 300.0
SUITE_PACKAGE = "conformance"
HYPOTHESIS_PROFILE = "autocast-certify"
SEED = 0

# Options of the worker command line that belong to the coordinator only.
_COORDINATOR_ONLY = {
    "--certify": True,
    "--certify-overwrite": False,
    "--test-timeout": True,
    "--junitxml": True,
    "--junit-xml": True,
}
# Options that narrow or stop the run; --certify refuses them.
_NARROWING = (
    ("keyword", "-k"),
    ("markexpr", "-m"),
    ("deselect", "--deselect"),
    ("ignore", "--ignore"),
    ("ignore_glob", "--ignore-glob"),
    ("lf", "--lf/--last-failed"),
    ("failedfirst", "--ff/--failed-first"),
    ("stepwise", "--sw/--stepwise"),
    ("numprocesses", "-n (xdist)"),
)

_STATUS = pytest.StashKey[tuple[str, str]]()
_EXPECTATION = pytest.StashKey[Expectation | None]()
_OUTCOMES = pytest.StashKey[list[tuple[str, str, Failure | None, bool]]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("autocast certification")
    g.addoption(
        "--expectations", metavar="FILE", help="vendor expectations YAML (skip/xfail/not-supported/waiver)"
    )
    g.addoption("--certify", metavar="DIR", help="certification run: isolated workers, bundle written to DIR")
    g.addoption("--certify-overwrite", action="store_true", help="let --certify replace a non-empty DIR")
    g.addoption(
        "--test-timeout",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"per-test time limit under --certify (default {DEFAULT_TIMEOUT_S:g}); past it: timeout",
    )
    g.addoption("--certify-worker", metavar="EVENTS", help=argparse_suppress())
    g.addoption("--certify-run-ids", metavar="FILE", help=argparse_suppress())
    g.addoption("--certify-list", metavar="FILE", help=argparse_suppress())


def argparse_suppress() -> str:
    import argparse

    return argparse.SUPPRESS


# ---------------------------------------------------------------------------
# Test identity and metadata
# ---------------------------------------------------------------------------


def suite_root() -> Path:
    import conformance

    return Path(conformance.__file__).resolve().parent


def stable_id(item: pytest.Item) -> str:
    """The node id with its file relative to the suite package (``conformance/test_x.py::...``).

    Independent of the rootdir and of where pytest was started, so expectations
    globs and bundles mean the same thing from a checkout and from a wheel.
    """
    path = Path(str(item.path)).resolve()
    _, sep, rest = item.nodeid.partition("::")
    try:
        rel = path.relative_to(suite_root())
    except ValueError:
        return item.nodeid
    return f"{SUITE_PACKAGE}/{rel.as_posix()}{sep}{rest}"


def collected_test(item: pytest.Item) -> B.CollectedTest:
    """Category, policy, op and dtype of a test: from its Case parameter, else its markers."""
    case = None
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        for v in callspec.params.values():
            if all(hasattr(v, a) for a in ("category", "policy", "op", "dtype")):
                case = v
                break
    names = [m.name for m in item.iter_markers()]
    policy = next((n for n in names if n in {p.value for p in Policy}), None)
    categories = _category_markers()
    category = next((n for n in names if n in categories), None) or _module_category(item)
    if case is not None:
        return B.CollectedTest(
            stable_id(item),
            case.category or category,
            case.policy or policy,
            case.op or None,
            case.dtype or None,
        )
    return B.CollectedTest(stable_id(item), category, policy)


def _category_markers() -> frozenset[str]:
    """The suite's categories (conformance.registry)."""
    return category_names()


def _module_category(item: pytest.Item) -> str:
    """``test_jit_limitations.py`` -> ``jit_limitations``: for tests with no category marker."""
    return Path(str(item.path)).stem.removeprefix("test_")


def _option(config: pytest.Config, name: str) -> Any:
    try:
        return config.getoption(name)
    except ValueError:
        return None


def backend_of(config: pytest.Config) -> str | None:
    b = _option(config, "backend")
    return str(b) if b else None


def run_spec(config: pytest.Config) -> Spec:
    """The spec the suite resolved for this run (the one its tests are generated from)."""
    from conformance.plugin import target_of

    return target_of(config).spec


def mandatory_core(config: pytest.Config) -> tuple[str, ...]:
    return run_spec(config).rules.mandatory_core


# ---------------------------------------------------------------------------
# Configuration: roles
# ---------------------------------------------------------------------------


def _load_expectations_or_fail(config: pytest.Config) -> Expectations:
    path = _option(config, "expectations")
    if not path:
        return EMPTY
    try:
        return load_expectations(Path(path))
    except SpecProblem as p:
        usage_error(f"--expectations: {p}")
    except SpecError as e:
        usage_error("--expectations: " + "\n".join(str(p) for p in e.problems))


def certify_refusals(config: pytest.Config) -> list[str]:
    """Options that would make a certification run partial or non-reproducible."""
    out = []
    for dest, flag in _NARROWING:
        v = _option(config, dest)
        if v and v not in ("no",):
            out.append(f"{flag} {v!r}" if isinstance(v, str) else flag)
    if (_option(config, "maxfail") or 0) > 0:
        out.append("-x/--maxfail")
    root = suite_root()
    for a in config.args:
        path = Path(config.invocation_params.dir, a.split("::", 1)[0]).resolve()
        inside = path != root and root in path.parents
        if "::" in a or inside:
            out.append(f"the test selection {a!r} (give the whole suite: --pyargs {SUITE_PACKAGE})")
    return out


def _fix_randomness(config: pytest.Config) -> None:
    """Derandomized Hypothesis, no example database, fixed seeds everywhere."""
    os.environ.setdefault("PYTHONHASHSEED", str(SEED))
    from conformance.hypothesis_profiles import force_derandomize

    force_derandomize(config)  # the suite's Hypothesis tests read their settings from the config
    try:
        from hypothesis import settings

        settings.register_profile(HYPOTHESIS_PROFILE, derandomize=True, database=None, print_blob=True)
        settings.load_profile(HYPOTHESIS_PROFILE)
    except ImportError:  # pragma: no cover - hypothesis is a dependency
        pass


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    if _option(config, "certify_list"):
        config.pluginmanager.register(ListOnly(config), "autocast-certify-list")
        return
    worker_events = _option(config, "certify_worker")
    exp = _load_expectations_or_fail(config)
    if worker_events:
        _fix_randomness(config)
        config.pluginmanager.register(Outcomes(config, exp, Path(worker_events)), "autocast-certify-worker")
        return
    certify = _option(config, "certify")
    if certify:
        refused = certify_refusals(config)
        if refused:
            usage_error(
                "--certify runs the full suite and refuses options that narrow or stop it: "
                + ", ".join(refused)
                + "; drop them (use --expectations to declare skips)"
            )
        timeout = float(_option(config, "test_timeout") or DEFAULT_TIMEOUT_S)
        if timeout <= 0:
            usage_error("--test-timeout must be a positive number of seconds")
        try:
            B.prepare_dir(Path(certify), bool(_option(config, "certify_overwrite")))
        except B.BundleError as e:
            usage_error(str(e))
        _fix_randomness(config)
        config.pluginmanager.register(Coordinator(config, exp, Path(certify), timeout), "autocast-certify")
        return
    if exp is not EMPTY:
        config.pluginmanager.register(Outcomes(config, exp, None), "autocast-expectations")


def _check_mandatory(config: pytest.Config, exp: Expectations, tests: Sequence[B.CollectedTest]) -> None:
    if not exp.entries:
        return
    core = mandatory_core(config)
    probs = mandatory_violations(exp, {t.id: t.category for t in tests}, core, backend_of(config))
    if probs:
        usage_error("--expectations: " + "\n".join(str(p) for p in probs))


def _mark_declared(items: Sequence[pytest.Item], exp: Expectations, device: str | None) -> None:
    """Skip (without running) tests declared skip or not-supported; remember each test's entry."""
    for item in items:
        e = exp.for_test(stable_id(item), device)
        item.stash[_EXPECTATION] = e
        if e is not None and e.status in ("skip", "not-supported"):
            item.add_marker(pytest.mark.skip(reason=f"{e.status}: {e.reason} ({e.where})"))


# ---------------------------------------------------------------------------
# Outcomes: expectations applied to reports (in-process and in workers)
# ---------------------------------------------------------------------------


def _failure(call: pytest.CallInfo[None]) -> Failure | None:
    if call.excinfo is None:
        return None
    exc = call.excinfo.value
    names: list[str] = []
    for cls in type(exc).__mro__:
        names += [cls.__name__, f"{cls.__module__}.{cls.__qualname__}"]
    return Failure(tuple(names), str(exc))


class Outcomes:
    """Applies expectations to each test's reports and records its bundle status."""

    def __init__(self, config: pytest.Config, exp: Expectations, events: Path | None) -> None:
        self.config = config
        self.exp = exp
        self.device = backend_of(config)
        self.writer = JsonlWriter(events) if events else None
        self.stale: list[Expectation] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        ids_file = _option(config, "certify_run_ids")
        if ids_file:
            wanted = wait_for_ids(Path(ids_file)).split("\n")
            order = {n: i for i, n in enumerate(w for w in wanted if w)}
            keep = sorted((it for it in items if it.nodeid in order), key=lambda it: order[it.nodeid])
            dropped = [it for it in items if it.nodeid not in order]
            if dropped:
                config.hook.pytest_deselected(items=dropped)
            items[:] = keep
        else:
            tests = [collected_test(it) for it in items]
            _check_mandatory(config, self.exp, tests)
            self.stale = stale_entries(self.exp, [t.id for t in tests], self.device)
        _mark_declared(items, self.exp, self.device)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.writer is not None:  # certification worker: fixed seeds per test
            random.seed(SEED)
            try:
                import numpy

                numpy.random.seed(SEED)
            except ImportError:  # pragma: no cover
                pass
            import torch

            torch.manual_seed(SEED)

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        if self.writer is not None:
            self.writer.write({"event": "start", "nodeid": nodeid, "time": time.time()})

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, None]:
        result = yield
        rep: pytest.TestReport = result.get_result()
        outcomes = item.stash.setdefault(_OUTCOMES, [])
        outcomes.append((rep.when, rep.outcome, _failure(call), hasattr(rep, "wasxfail")))
        e = item.stash.get(_EXPECTATION, None)
        if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed"):
            outcome = rep.outcome
            status, note = status_of(outcome, e, _failure(call), hasattr(rep, "wasxfail"))
            item.stash[_STATUS] = (status, note)
            _rewrite(rep, status, note)
        elif rep.when == "teardown" and rep.outcome == "failed":
            item.stash[_STATUS] = ("fail", "teardown failed")
        if rep.when == "teardown":
            status, note = item.stash.get(_STATUS, ("fail", "the test produced no result"))
            rep.user_properties.append(("certify_status", status))
            if note:
                rep.user_properties.append(("certify_note", note))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.writer is not None:
            data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
            self.writer.write({"event": "report", "nodeid": report.nodeid, "report": data})

    def pytest_runtest_logfinish(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        pass

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, Any, None]:
        start = time.monotonic()
        yield
        if self.writer is not None:
            status, note = item.stash.get(_STATUS, ("fail", "the test produced no result"))
            e = item.stash.get(_EXPECTATION, None)
            self.writer.write(
                {
                    "event": "finish",
                    "nodeid": item.nodeid,
                    "status": status,
                    "note": note,
                    "expectation": e.describe() if e else None,
                    "duration": time.monotonic() - start,
                }
            )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.writer is None:
            report_stale(terminalreporter, self.stale, other_device_entries(self.exp, self.device))


def wait_for_ids(path: Path) -> str:
    """A spare worker waits, collected, until the coordinator hands it the ids to run.

    It exits when the coordinator is gone (its parent process changed).
    """
    parent = os.getppid()
    while not path.exists():
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.02)
    return path.read_text(encoding="utf-8")


def _rewrite(rep: pytest.TestReport, status: str, note: str) -> None:
    """Make pytest's own outcome agree with the status (so -x, exit codes and JUnit agree)."""
    if status in ("xfail", "waived") and rep.outcome == "failed":
        rep.outcome = "skipped"
        rep.wasxfail = f"{status}: {note}"
    elif status == "unexpected-pass":
        rep.outcome = "failed"
        rep.longrepr = f"[unexpected pass] {note}"


def report_stale(tr: Any, stale: Sequence[Expectation], elsewhere: Sequence[Expectation]) -> None:
    if stale:
        tr.write_sep("-", f"{len(stale)} stale expectation(s): they match no test")
        for e in stale:
            tr.write_line(f"{e.where}: {e.status} {e.match!r} matches no collected test")
    if elsewhere:
        tr.write_line(f"({len(elsewhere)} expectation(s) are for other devices and were not applied)")


# ---------------------------------------------------------------------------
# --certify-list: the collected test list, for verify-bundle
# ---------------------------------------------------------------------------


class ListOnly:
    def __init__(self, config: pytest.Config) -> None:
        self.path = Path(_option(config, "certify_list"))

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        tests = [asdict(collected_test(it)) for it in items]
        self.path.write_text(json.dumps(tests, indent=1) + "\n", encoding="utf-8")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        return True


# ---------------------------------------------------------------------------
# Coordinator
# ---------------------------------------------------------------------------


def worker_args(args: Sequence[str]) -> list[str]:
    """The invocation's arguments without the coordinator-only options."""
    out: list[str] = []
    skip_next = False
    for a in args:
        if skip_next:
            skip_next = False
            continue
        name = a.split("=", 1)[0]
        if name in _COORDINATOR_ONLY:
            skip_next = _COORDINATOR_ONLY[name] and "=" not in a
            continue
        out.append(a)
    return out


def suite_version() -> str:
    try:
        return metadata.version("autocast-conformance")
    except metadata.PackageNotFoundError:
        return "unknown"


class Coordinator:
    """Runs the collected tests in workers, records each result, writes the bundle."""

    def __init__(self, config: pytest.Config, exp: Expectations, root: Path, timeout: float) -> None:
        self.config = config
        self.exp = exp
        self.root = root.resolve()
        self.timeout = timeout
        self.device = backend_of(config)
        self.items: dict[str, pytest.Item] = {}
        self.tests: dict[str, B.CollectedTest] = {}
        self.results: dict[str, B.TestResult] = {}
        self.pending: dict[str, list[dict[str, Any]]] = {}
        self.stale: list[Expectation] = []
        self.log: JsonlWriter | None = None
        self.workers = 0
        self.started = time.time()
        self.verdict: B.Verdict | None = None
        self.error: str | None = None
        self.spec_copies: list[str] = []

    # -- collection ---------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        tests = [collected_test(it) for it in items]
        _check_mandatory(config, self.exp, tests)
        self.stale = stale_entries(self.exp, [t.id for t in tests], self.device)
        for it, t in zip(items, tests, strict=True):
            self.items[it.nodeid] = it
            self.tests[it.nodeid] = t
        spec_paths = [str(p) for p in (_option(config, "spec") or ())]
        copies = B.copy_spec_files(spec_paths, self.root / B.SPEC_COPY)
        self.spec_copies = [Path(p).relative_to(self.root).as_posix() for p in copies]
        (self.root / B.COLLECTED).write_text(B.to_json([asdict(t) for t in tests]), encoding="utf-8")

    # -- running ------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if session.testsfailed:
            raise session.Interrupted(
                f"{session.testsfailed} error(s) during collection: certification needs the full suite"
            )
        self.log = JsonlWriter(self.root / B.RESULTS_LOG)
        inv = self.config.invocation_params
        base = [*python_pytest(), *worker_args(inv.args), "-q", "-p", "no:cacheprovider"]

        def command(ids_file: Path, events_file: Path) -> list[str]:
            return [*base, "--certify-worker", str(events_file), "--certify-run-ids", str(ids_file)]

        plan = WorkerPlan(
            command,
            self.root / B.LOGS,
            Path(inv.dir),
            self.timeout,
            env={"PYTHONHASHSEED": str(SEED), "PYTEST_ADDOPTS": os.environ.get("PYTEST_ADDOPTS", "")},
        )
        try:
            self.workers = run_isolated(list(self.items), plan, self._on_event, self._on_lost)
        except WorkerError as e:
            self.error = str(e)
            raise session.Interrupted(f"certification stopped: {e}") from None
        return True

    def _on_event(self, ev: dict[str, Any]) -> None:
        nodeid = ev.get("nodeid", "")
        item = self.items.get(nodeid)
        if item is None:
            return
        kind = ev["event"]
        if kind == "start":
            self.pending[nodeid] = []
            item.ihook.pytest_runtest_logstart(nodeid=nodeid, location=item.location)
        elif kind == "report":
            rep = self.config.hook.pytest_report_from_serializable(config=self.config, data=ev["report"])
            if rep is not None:
                item.ihook.pytest_runtest_logreport(report=rep)
                self.pending.setdefault(nodeid, []).append(ev["report"])
        elif kind == "finish":
            detail = _longrepr_text(self.pending.pop(nodeid, []))
            self._record(
                nodeid,
                ev["status"],
                ev.get("note", ""),
                ev.get("duration", 0.0),
                ev.get("expectation"),
                detail,
            )
            item.ihook.pytest_runtest_logfinish(nodeid=nodeid, location=item.location)

    def _on_lost(self, lost: Lost) -> None:
        item = self.items.get(lost.nodeid)
        if item is None:
            return
        if lost.nodeid not in self.pending:
            item.ihook.pytest_runtest_logstart(nodeid=lost.nodeid, location=item.location)
        rep = pytest.TestReport(
            lost.nodeid,
            item.location,
            {},
            "failed",
            f"[{lost.status}] {lost.detail}",
            "call",
            duration=lost.duration,
            user_properties=[("certify_status", lost.status)],
        )
        item.ihook.pytest_runtest_logreport(report=rep)
        self.pending.pop(lost.nodeid, None)
        e = self.exp.for_test(self.tests[lost.nodeid].id, self.device)
        self._record(
            lost.nodeid,
            lost.status,
            lost.detail.split("\n", 1)[0],
            lost.duration,
            e.describe() if e else None,
            lost.detail,
        )
        item.ihook.pytest_runtest_logfinish(nodeid=lost.nodeid, location=item.location)

    def _record(
        self, nodeid: str, status: str, note: str, duration: float, expectation: str | None, detail: str
    ) -> None:
        t = self.tests[nodeid]
        r = B.TestResult(
            t.id,
            status,
            t.category,
            t.policy,
            t.op,
            t.dtype,
            round(float(duration), 4),
            note or "",
            expectation,
            detail[:4000],
        )
        self.results[nodeid] = r
        assert self.log is not None
        self.log.write(asdict(r))

    # -- the bundle ---------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.log is None:  # interrupted before running: leave what was written
            return
        self.log.close()
        results = [self.results[n] for n in self.items if n in self.results]
        core = mandatory_core(self.config)
        self.verdict = B.results_verdict(results, core)
        if len(results) < len(self.items):
            self.verdict.conformant = False
            self.verdict.reasons.append(f"{len(self.items) - len(results)} test(s) have no result")
        spec_paths = [str(p) for p in (_option(self.config, "spec") or ())]
        meta = self._metadata(results, spec_paths, core)
        root = self.root
        (root / B.RESULTS).write_text(B.to_json({"tests": [asdict(r) for r in results]}), encoding="utf-8")
        (root / B.ENVIRONMENT).write_text(B.to_json(B.environment(self.device)), encoding="utf-8")
        (root / B.JUNIT).write_text(B.render_junit(results, "autocast-conformance"), encoding="utf-8")
        (root / B.SUMMARY).write_text(B.render_summary(results, meta), encoding="utf-8")
        if self.exp.entries or self.exp.text:
            (root / B.EXPECTATIONS_COPY).write_text(self.exp.text, encoding="utf-8")
        meta["spec_copies"] = self.spec_copies
        (root / B.CERTIFICATION).write_text(B.to_json(meta), encoding="utf-8")
        B.write_manifest(root)

    def _metadata(
        self, results: Sequence[B.TestResult], spec_paths: list[str], core: Sequence[str]
    ) -> dict[str, Any]:
        spec = run_spec(self.config)
        inv = self.config.invocation_params
        assert self.verdict is not None
        return {
            "bundle_format": B.BUNDLE_FORMAT,
            "suite_version": suite_version(),
            "suite_path": str(suite_root()),
            "spec_hash": spec.content_hash,
            "torch_version": spec.torch_version,
            "mandatory_core": list(core),
            "options": {
                "backend": self.device,
                "dtype": _option(self.config, "dtype"),
                "spec": spec_paths,
                "reference_device": _option(self.config, "reference_device"),
                "policy_only": bool(_option(self.config, "policy_only")),
                "implementation": _option(self.config, "implementation") or "native",
                "expectations": _option(self.config, "expectations"),
                "test_timeout_s": self.timeout,
                "hypothesis": {"profile": HYPOTHESIS_PROFILE, "derandomize": True},
                "seed": SEED,
            },
            "invocation": {"args": list(inv.args), "dir": str(inv.dir), "worker_args": worker_args(inv.args)},
            "plugins": _plugin_modules(inv.args),
            "counts": B.counts(results),
            "tests": len(self.items),
            "workers": self.workers,
            "wall_s": round(time.time() - self.started, 2),
            "stale_expectations": [f"{e.where}: {e.status} {e.match!r}" for e in self.stale],
            "verdict": asdict(self.verdict),
        }

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        report_stale(terminalreporter, self.stale, other_device_entries(self.exp, self.device))
        if self.verdict is None:
            return
        tr = terminalreporter
        c = B.counts(self.results.values())
        tr.write_sep("=", "certification bundle: " + str(self.root))
        tr.write_line(", ".join(f"{s} {n}" for s, n in c.items() if n) + f"; {self.workers} worker(s)")
        if self.verdict.conformant:
            tr.write_line("verdict: conformant")
        else:
            tr.write_line("verdict: NOT conformant: " + "; ".join(self.verdict.reasons))
        tr.write_line(f"check it with: autocast-spec verify-bundle {self.root}")


def _plugin_modules(args: Sequence[str]) -> list[str]:
    mods = []
    for i, a in enumerate(args):
        if a == "-p" and i + 1 < len(args):
            mods.append(args[i + 1])
        elif a.startswith("-p") and len(a) > 2:
            mods.append(a[2:])
    return [m for m in mods if not m.startswith("no:")]


def _longrepr_text(reports: Sequence[dict[str, Any]]) -> str:
    parts = []
    for r in reports:
        if r.get("outcome") == "failed":
            lr = r.get("longrepr")
            if isinstance(lr, str):
                parts.append(lr)
            elif isinstance(lr, dict):
                crash = (lr.get("reprcrash") or {}).get("message")
                parts.append(str(crash or lr)[:2000])
            elif lr:
                parts.append(str(lr)[:2000])
    return "\n".join(parts)

"""The certification's controller: collects, records what the workers report, writes the bundle.

It runs in the xdist controller (the pytest process the vendor started). It
collects the suite itself (xdist's controller otherwise does not), while the
workers start; checks the expectations against the whole list and writes
``collected.json``; in a shard (``--certify-shard``) it then keeps the shard's tests
(:mod:`.shard`) and writes ``shard.json``. Each test's
status arrives on its teardown report from the worker (:mod:`.outcomes`); a
test whose worker died arrives as xdist's crash item and gets ``crash`` or
``timeout`` from the worker's log (:mod:`.workers`). Every result is appended to
``results.jsonl`` as it arrives; the other files are written at the end.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from conformance.session import target_of
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND

from . import bundle as B
from .expectations import Expectation, Expectations, other_device_entries, stale_entries
from .identity import (
    CollectedTest,
    backend_of,
    collected_test,
    environment,
    mandatory_core,
    option,
    plugin_modules,
    run_spec,
    suite_root,
    suite_version,
)
from .outcomes import (
    HYPOTHESIS_PROFILE,
    NO_RESULT,
    NOTE_PROPERTY,
    SEED,
    STATUS_PROPERTY,
    check_mandatory,
    report_stale,
)
from .shard import ShardPlan
from .verdict import Verdict, mode_verdicts, results_verdict
from .workers import RUN_ONLY_OPTIONS, WORKER_ROOT, log_path, lost_test

DETAIL_CHARS = 4000


def worker_args(args: Sequence[str]) -> list[str]:
    """The invocation's arguments without those that say how to run rather than what (recorded)."""
    out: list[str] = []
    skip_next = False
    for a in args:
        if skip_next:
            skip_next = False
            continue
        name = a.split("=", 1)[0]
        if name in RUN_ONLY_OPTIONS:
            skip_next = RUN_ONLY_OPTIONS[name] and "=" not in a
            continue
        if a.startswith("-n") and not a.startswith("--"):  # -n2, -nauto
            continue
        out.append(a)
    return out


def failure_text(report: pytest.TestReport) -> str:
    """The failure's one-line cause where pytest has one, else its text."""
    crash = getattr(report.longrepr, "reprcrash", None)
    return str(getattr(crash, "message", None) or report.longrepr)[:2000]


class Recorder:
    """Records each test's result as its worker reports it; writes the bundle at the end."""

    def __init__(
        self, config: pytest.Config, exp: Expectations, root: Path, timeout: float, plan: ShardPlan | None
    ) -> None:
        self.config = config
        self.plan = plan
        self.shard: dict[str, Any] | None = None  # shard.json, in a shard
        self.tests_in_run = 0
        self.exp = exp
        self.root = root.resolve()
        self.timeout = timeout
        self.device = backend_of(config)
        self.tests: dict[str, CollectedTest] = {}  # node id -> test, in collection order
        self.results: dict[str, B.TestResult] = {}
        self.failures: dict[str, list[str]] = {}
        self.durations: dict[str, float] = {}
        self.started: dict[str, float] = {}
        self.stale: list[Expectation] = []
        self.log: B.JsonlWriter | None = None
        self.workers = 0
        self.collected_on: set[str] = set()
        self.started_at = time.time()
        self.verdict: Verdict | None = None
        self.spec_copies: list[str] = []

    # -- collection ---------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: pytest.Session) -> bool:
        session.perform_collect()  # xdist's controller would not collect; the bundle needs the list
        return True

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        tests = [collected_test(it) for it in items]
        check_mandatory(config, self.exp, tests)
        self.stale = stale_entries(self.exp, [t.id for t in tests], self.device)
        by_item = dict(zip(items, tests, strict=True))
        spec_paths = [str(p) for p in (option(config, "spec") or ())]
        copies = B.copy_spec_files(spec_paths, self.root / B.SPEC_COPY)
        self.spec_copies = [Path(p).relative_to(self.root).as_posix() for p in copies]
        (self.root / B.COLLECTED).write_text(B.to_json([asdict(t) for t in tests]), encoding="utf-8")
        self.tests_in_run = len(tests)
        if self.plan is not None:  # the whole run's list is above; this shard runs its part
            keep, drop = self.plan.split(items, tests)
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
            self.shard = self.plan.record([by_item[it] for it in keep], tests)
            (self.root / B.SHARD).write_text(B.to_json(self.shard), encoding="utf-8")
        self.tests = {it.nodeid: by_item[it] for it in items}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        if session.testsfailed:
            raise session.Interrupted(
                f"{session.testsfailed} error(s) during collection: certification needs the full suite"
            )
        self.log = B.JsonlWriter(self.root / B.RESULTS_LOG)  # then xdist runs the loop

    # -- the workers (xdist hooks) -------------------------------------------

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_ROOT] = str(self.root)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodeready(self, node: Any) -> None:
        self.workers += 1

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self.collected_on.add(node.gateway.id)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        wid = node.gateway.id
        if error and wid not in self.collected_on:
            # xdist would replace it, and the replacement would die the same way
            pytest.exit(
                f"certification stopped: worker {wid} died before it finished collecting ({error}); "
                f"see {log_path(self.root, wid)}"
            )

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        wid = report.node.gateway.id  # xdist puts the worker on its crash report
        if crashitem not in self.tests or crashitem in self.results:
            return
        status, detail = lost_test(log_path(self.root, wid), wid, crashitem, self.timeout)
        report.longrepr = f"[{status}] {detail}"
        report.user_properties.append((STATUS_PROPERTY, status))
        duration = time.monotonic() - self.started.get(crashitem, time.monotonic())
        self._record(crashitem, status, detail.split("\n", 1)[0], duration, detail)

    # -- the reports ----------------------------------------------------------

    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        self.started[nodeid] = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        if nodeid not in self.tests or nodeid in self.results:
            return
        self.durations[nodeid] = self.durations.get(nodeid, 0.0) + report.duration
        if report.failed:
            self.failures.setdefault(nodeid, []).append(failure_text(report))
        if report.when == "teardown":
            props = dict(report.user_properties)
            status = str(props.get(STATUS_PROPERTY, NO_RESULT[0]))
            note = str(props.get(NOTE_PROPERTY, "" if STATUS_PROPERTY in props else NO_RESULT[1]))
            detail = "\n".join(self.failures.pop(nodeid, []))
            self._record(nodeid, status, note, self.durations[nodeid], detail)

    def _record(self, nodeid: str, status: str, note: str, duration: float, detail: str) -> None:
        t = self.tests[nodeid]
        e = self.exp.for_test(t.id, self.device)
        r = B.TestResult(
            t.id,
            status,
            t.category,
            t.policy,
            t.op,
            t.dtype,
            round(float(duration), 4),
            note or "",
            e.describe() if e else None,
            detail[:DETAIL_CHARS],
            t.mode,
        )
        self.results[nodeid] = r
        assert self.log is not None
        self.log.write(asdict(r))

    # -- the bundle ---------------------------------------------------------

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.log is None:  # stopped before running: leave what was written
            return
        self.log.close()
        results = [self.results[n] for n in self.tests if n in self.results]
        core = mandatory_core(self.config)
        bugs = [b.id for b in run_spec(self.config).rules.known_bugs]
        self.verdict = results_verdict(results, core, bugs)
        if len(results) < len(self.tests):
            self.verdict.conformant = False
            self.verdict.reasons.append(f"{len(self.tests) - len(results)} test(s) have no result")
        if self.shard is not None:
            self.verdict.conformant = False
            self.verdict.reasons.append(
                f"shard {self.shard['index']}/{self.shard['count']} of a run: "
                "a certificate is every shard merged"
            )
        meta = self._metadata(results, core)
        meta["mode_verdicts"] = {m: asdict(v) for m, v in mode_verdicts(results, core, bugs).items()}
        root = self.root
        (root / B.RESULTS).write_text(B.to_json({"tests": [asdict(r) for r in results]}), encoding="utf-8")
        env = environment(self.device, target_of(self.config).device_spec.vendor)
        (root / B.ENVIRONMENT).write_text(B.to_json(env), encoding="utf-8")
        (root / B.JUNIT).write_text(B.render_junit(results, "autocast-conformance"), encoding="utf-8")
        (root / B.SUMMARY).write_text(B.render_summary(results, meta), encoding="utf-8")
        if self.exp.entries or self.exp.text:
            (root / B.EXPECTATIONS_COPY).write_text(self.exp.text, encoding="utf-8")
        meta["spec_copies"] = self.spec_copies
        (root / B.CERTIFICATION).write_text(B.to_json(meta), encoding="utf-8")
        for log in (root / B.LOGS).glob("*.log"):
            if not log.read_text(encoding="utf-8", errors="replace").strip():
                log.unlink()
        B.write_manifest(root)

    def _metadata(self, results: Sequence[B.TestResult], core: Sequence[str]) -> dict[str, Any]:
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
                "dtype": option(self.config, "dtype"),
                "spec": [str(p) for p in (option(self.config, "spec") or ())],
                "reference_device": option(self.config, "reference_device"),
                "policy_only": bool(option(self.config, "policy_only")),
                "implementation": option(self.config, "implementation") or "native",
                "expectations": option(self.config, "expectations"),
                "modes": list(option(self.config, "mode") or ["eager"]),
                "compile_backend": list(option(self.config, "compile_backend") or [DEFAULT_COMPILE_BACKEND]),
                "test_timeout_s": self.timeout,
                "hypothesis": {"profile": HYPOTHESIS_PROFILE, "derandomize": True},
                "seed": SEED,
            },
            "invocation": {"args": list(inv.args), "dir": str(inv.dir), "worker_args": worker_args(inv.args)},
            "plugins": plugin_modules(inv.args),
            "counts": B.counts(results),
            "tests": len(self.tests),
            "tests_in_run": self.tests_in_run,
            "shard": None if self.shard is None else self._shard_summary(),
            "workers": self.workers,
            "wall_s": round(time.time() - self.started_at, 2),
            "stale_expectations": [f"{e.where}: {e.status} {e.match!r}" for e in self.stale],
            "verdict": asdict(self.verdict),
        }

    def _shard_summary(self) -> dict[str, Any]:
        assert self.shard is not None
        return {"index": self.shard["index"], "count": self.shard["count"], "tests": len(self.tests)}

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
        if self.shard is not None:
            tr.write_line(
                f"merge the {self.shard['count']} shards with: autocast-spec merge-bundles OUT DIR..."
            )
        else:
            tr.write_line(f"check it with: autocast-spec verify-bundle {self.root}")

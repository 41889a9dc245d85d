"""pytest sub-plugin for vendor certification: its options, and which role each process plays.

Options:

``--expectations FILE``  apply a vendor's expectations (skip, xfail, not-supported, waiver)
``--certify DIR``        certify: the whole suite in pytest-xdist workers, a bundle written to DIR
``--certify-overwrite``  allow --certify to replace a non-empty DIR
``--test-timeout S``     per-test limit under --certify (default 300 s); past it: ``timeout``
``--certify-shard K/N``  certify the K-th of N shards of the run (:mod:`.shard`)
``--certify-costs FILE`` the cost table that balances the shards (default: the bundled one)

Roles:

* a normal run with --expectations: :class:`.outcomes.Outcomes` changes outcomes
  in-process and prints stale entries;
* the controller of a certification (the process the vendor started): checks the
  options, then :class:`.recorder.Recorder` collects, records and writes the bundle;
* a certification's xdist worker: :class:`.outcomes.Outcomes` (statuses, fixed
  seeds) and :class:`.workers.WorkerLog` (why a test was lost); in a shard,
  :class:`.shard.ShardFilter` keeps the shard's tests;
* ``--certify-list FILE`` (internal): :class:`.listing.ListOnly` writes the
  collected list for ``autocast-spec verify-bundle`` and runs nothing.

Without ``-n`` a certification runs in one xdist worker, so a crash or a hang
costs one test, never the run (:mod:`.workers`).
"""

from __future__ import annotations

import argparse
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from autocast_spec.problems import SpecError, SpecProblem
from conformance.errors import usage_error

from . import bundle as B
from .expectations import EMPTY, Expectations, load_expectations
from .identity import SUITE_PACKAGE, option, suite_root
from .isolation import worker_log_root
from .listing import ListOnly
from .outcomes import Outcomes, fix_randomness
from .recorder import Recorder
from .shard import ShardError, ShardFilter, ShardPlan, load_costs, parse_shard
from .workers import QuickExit, WorkerLog, log_path, no_workers, prepare_options, refusals, worker_root

DEFAULT_TIMEOUT_S = 300.0

# Options that narrow or stop the run; --certify refuses them.
_NARROWING = (
    ("keyword", "-k"),
    ("op", "--op"),
    ("markexpr", "-m"),
    ("deselect", "--deselect"),
    ("ignore", "--ignore"),
    ("ignore_glob", "--ignore-glob"),
    ("lf", "--lf/--last-failed"),
    ("failedfirst", "--ff/--failed-first"),
    ("stepwise", "--sw/--stepwise"),
)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("autocast certification")
    g.addoption(
        "--expectations", metavar="FILE", help="vendor expectations YAML (skip/xfail/not-supported/waiver)"
    )
    g.addoption(
        "--certify",
        metavar="DIR",
        help="certification run: the whole suite in xdist workers (one unless -n), bundle written to DIR",
    )
    g.addoption("--certify-overwrite", action="store_true", help="let --certify replace a non-empty DIR")
    g.addoption(
        "--test-timeout",
        metavar="SECONDS",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        help=f"per-test time limit under --certify (default {DEFAULT_TIMEOUT_S:g}); past it: timeout",
    )
    g.addoption(
        "--certify-shard",
        metavar="K/N",
        help="certify the K-th of N shards of the run, balanced by measured cost; "
        "merge the N bundles with autocast-spec merge-bundles",
    )
    g.addoption(
        "--certify-costs",
        metavar="FILE",
        help="the cost table that balances --certify-shard (default: the suite's, "
        "measured by benchmarks/bench_certify_costs.py)",
    )
    g.addoption("--certify-list", metavar="FILE", help=argparse.SUPPRESS)


def _timeout(config: pytest.Config) -> float:
    return float(option(config, "test_timeout") or DEFAULT_TIMEOUT_S)


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config: pytest.Config) -> Generator[None, Any, Any]:
    """Set xdist's and pytest-timeout's options before they read them."""
    if option(config, "certify_list"):
        no_workers(config)
    elif option(config, "certify"):
        prepare_options(config, _timeout(config))
    return (yield)


def _load_expectations_or_fail(config: pytest.Config) -> Expectations:
    path = option(config, "expectations")
    if not path:
        return EMPTY
    try:
        return load_expectations(Path(path))
    except SpecProblem as p:
        usage_error(f"--expectations: {p}")
    except SpecError as e:
        usage_error("--expectations: " + "\n".join(str(p) for p in e.problems))


def shard_plan(config: pytest.Config) -> ShardPlan | None:
    """The shard this run certifies (None without --certify-shard); exit 2 for a bad one."""
    given, costs = option(config, "certify_shard"), option(config, "certify_costs")
    if not given:
        if costs:
            usage_error("--certify-costs balances --certify-shard: add --certify-shard K/N or drop it")
        return None
    if not option(config, "certify"):
        usage_error("--certify-shard splits a certification: add --certify DIR")
    try:
        table = load_costs(Path(config.invocation_params.dir, costs) if costs else None)
        return ShardPlan(parse_shard(given), table)
    except ShardError as e:
        usage_error(str(e))


def certify_refusals(config: pytest.Config) -> list[str]:
    """Options that would make a certification run partial or non-reproducible."""
    out = []
    for dest, flag in _NARROWING:
        v = option(config, dest)
        if v and v not in ("no",):
            out.append(f"{flag} {v!r}" if isinstance(v, str) else flag)
    if (option(config, "maxfail") or 0) > 0:
        out.append("-x/--maxfail")
    root = suite_root()
    for a in config.args:
        path = Path(config.invocation_params.dir, a.split("::", 1)[0]).resolve()
        inside = path != root and root in path.parents
        if "::" in a or inside:
            out.append(f"the test selection {a!r} (give the whole suite: --pyargs {SUITE_PACKAGE})")
    return out


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    listing = option(config, "certify_list")
    if listing:
        config.pluginmanager.register(ListOnly(Path(listing)), "autocast-certify-list")
        return
    exp = _load_expectations_or_fail(config)
    root = worker_root(config)
    if root is not None:  # a certification's xdist worker
        fix_randomness(config)
        config.pluginmanager.register(Outcomes(config, exp, certifying=True), "autocast-certify-outcomes")
        wid = config.workerinput["workerid"]  # type: ignore[attr-defined]
        config.pluginmanager.register(WorkerLog(log_path(root, wid)), "autocast-certify-worker")
        config.pluginmanager.register(QuickExit(), "autocast-certify-quick-exit")
        plan = shard_plan(config)
        if plan is not None:
            config.pluginmanager.register(ShardFilter(plan), "autocast-certify-shard")
        return
    plain = worker_log_root(config)
    if plain is not None:  # a plain run's isolating worker (.isolation): its log, for a lost test
        wid = config.workerinput["workerid"]  # type: ignore[attr-defined]
        config.pluginmanager.register(WorkerLog(log_path(plain, wid)), "autocast-isolated-worker")
    plan = shard_plan(config)
    certify = option(config, "certify")
    if certify and not hasattr(config, "workerinput"):
        refused = certify_refusals(config)
        if refused:
            usage_error(
                "--certify runs the full suite and refuses options that narrow or stop it: "
                + ", ".join(refused)
                + "; drop them (use --expectations to declare skips)"
            )
        unisolated = refusals(config)
        if unisolated:
            usage_error(
                "--certify isolates every test with pytest-xdist and pytest-timeout: " + "; ".join(unisolated)
            )
        if _timeout(config) <= 0:
            usage_error("--test-timeout must be a positive number of seconds")
        try:
            B.prepare_dir(Path(certify), bool(option(config, "certify_overwrite")))
        except B.BundleError as e:
            usage_error(str(e))
        fix_randomness(config)
        recorder = Recorder(config, exp, Path(certify), _timeout(config), plan)
        config.pluginmanager.register(recorder, "autocast-certify")
        return
    if exp is not EMPTY:
        config.pluginmanager.register(Outcomes(config, exp, certifying=False), "autocast-expectations")

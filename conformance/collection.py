"""Sub-plugin: parametrization from the spec, fixtures, and the state-leak check.

A test marked ``@pytest.mark.conformance_cases(generator)`` takes a ``case`` parametrized from
that generator of a category module; ``lower`` is each dtype under test, ``listed_op`` each
op the device spec lists. Every suite test must leave the thread's autocast state as it found it
(check ``context.leaked_state``: a failure with the command that reruns the test, or an xfail
where a known bug declares the leak).
"""

from __future__ import annotations

import shlex
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import torch

from reference_impl.draws import independent_of_imports
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.state import restore_autocast, snapshot_autocast

from . import registry
from .kit.case import Case, device_needed
from .kit.category import CaseGenerator
from .kit.refusal import intercept_only, kernel_gap, require_autocast
from .kit.verdict import Observation, expect
from .session import TARGET_KEY, options_of, target_of
from .target import Target

PACKAGE_DIR = Path(__file__).resolve().parent
POLICY_ONLY_REASON = "--policy-only: no kernels run on FakeTensors, so numeric results are not checked"
REAL_TENSORS_REASON = (
    "--policy-only: the weight-cast cache and custom autograd functions are checked with real tensors only "
    "(FakeTensors held in the C++ cast cache or run backward crash the process)"
)


def _in_suite(item: pytest.Item) -> bool:
    try:
        return Path(str(item.path)).resolve().parent == PACKAGE_DIR
    except OSError:  # pragma: no cover
        return False


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if TARGET_KEY in config.stash:
        return ["autocast conformance: " + config.stash[TARGET_KEY].describe()]
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    """A spec for another torch release is said in one line at the top, whatever the verbosity."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    target = session.config.stash.get(TARGET_KEY, None)
    if reporter is not None and target is not None and target.version_note:
        reporter.write_line(f"autocast conformance: {target.version_note}", yellow=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if Path(str(metafunc.definition.path)).resolve().parent != PACKAGE_DIR:
        return
    target = target_of(metafunc.config)
    if "case" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("conformance_cases")
        if marker is None:
            raise pytest.UsageError(
                f"{metafunc.definition.nodeid}: 'case' needs @conformance_cases(<a category's generator>)"
            )
        generator = marker.args[0]
        params = [
            pytest.param(
                c, id=c.id, marks=[getattr(pytest.mark, m) for m in c.markers] + _device_skip(target, c)
            )
            for c in registry.cases(target, generator)
        ]
        params += _absent_params(target, generator)
        metafunc.parametrize("case", params)
    if "lower" in metafunc.fixturenames:
        metafunc.parametrize(
            "lower", target.dtypes, ids=[f"{target.device}-{dtype_name(d)}" for d in target.dtypes]
        )
    if "listed_op" in metafunc.fixturenames:
        listed = [
            pytest.param(op, id=f"{target.device}-{op}")
            for op in sorted(target.device_spec.ops)
            if target.selects(op)
        ]
        absent = [
            pytest.param(
                op, id=f"{target.device}-{op}", marks=pytest.mark.skip(reason=target.absent_reason(op))
            )
            for op in target.absent_ops
            if target.selects(op)
        ]
        metafunc.parametrize("listed_op", listed + absent)


def _device_skip(target: Target, case: Case[Any]) -> list[Any]:
    """Skip an op whose Autocast kernel itself needs the device (needs_device) where it is absent,
    the output checks of an op whose kernel cannot run its samples (intercept_only), and the
    checks that run a kernel the op catalog declares missing for the dtype (kernel_gaps)."""
    why = device_needed(target, case.op) if case.op and case.category != "registration" else None
    if why is None and registry.needs_output(case):
        why = intercept_only(target, case.op)
    if why is None and registry.runs_kernel(case):
        why = kernel_gap(target, case.op, case.dtype)
    return [pytest.mark.skip(reason=why)] if why else []


def _absent_params(target: Target, generator: CaseGenerator) -> list[Any]:
    """One skipped test per category an op the installed torch lacks would have been tested in."""
    full = target.spec.devices.get(target.device_spec.device)
    owner = registry.category_of(generator).name
    out = []
    for op in target.absent_ops:
        if not target.selects(op):
            continue
        entry = full.ops.get(op) if full else None
        if entry is None or owner not in registry.expected_categories(entry.policy, target.spec.rules):
            continue
        case: Case[None] = Case(owner, target.device, None, entry.policy, op)
        marks = [
            *(getattr(pytest.mark, m) for m in case.markers),
            pytest.mark.skip(reason=target.absent_reason(op)),
        ]
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    suite_items = [i for i in items if _in_suite(i)]
    if not suite_items:
        return
    target = target_of(config)
    skip = pytest.mark.skip(reason=POLICY_ONLY_REASON)
    skip_real = pytest.mark.skip(reason=REAL_TENSORS_REASON)
    for item in suite_items:
        item.add_marker(pytest.mark.conformance)
        if target.policy_only and item.get_closest_marker("requires_kernels"):
            item.add_marker(skip)
        elif target.policy_only and item.get_closest_marker("real_tensors"):
            item.add_marker(skip_real)


# pytest's log capture, where the user set none of its options
LOG_OPTIONS = ("log_level", "log_file", "log_file_level", "log_cli_level")


def pytest_collection_finish(session: pytest.Session) -> None:
    """A run of the suite alone turns pytest's log capture off unless a ``--log-*`` option (or its
    ini value) asks for it. pytest (8.4+) attaches its handlers to every non-propagating logger
    three times per test, and torch registers dozens: a quarter of an eager run's time, with no
    test of the suite logging (torch's warnings still reach stderr, which pytest captures)."""
    config = session.config
    if not session.items or not all(_in_suite(i) for i in session.items):
        return  # another project's tests run in this session too: theirs to decide
    if any(config.getoption(o, None) or config.getini(o) for o in LOG_OPTIONS):
        return
    if config.getoption("log_cli", None) or config.getini("log_cli"):
        return
    capture = config.pluginmanager.get_plugin("logging-plugin")
    if capture is not None:
        config.pluginmanager.unregister(capture)
        capture.pytest_unconfigure()  # closes its handlers, as pytest would at the end


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Judge (check ``context.leaked_state``, through :func:`~.kit.verdict.expect`) a suite
    test that leaves the autocast state different from how it found it; the state is put
    back either way, for the next test. A test that failed already keeps its own failure.

    Every suite test runs :func:`reference_impl.draws.independent_of_imports`: what a
    Hypothesis test of the suite draws from its seed does not depend on the modules that the
    tests before it, in its process, imported."""
    if not _in_suite(item):
        return (yield)
    target = target_of(item.config)
    devices = tuple(dict.fromkeys((target.device, "cpu")))
    before = snapshot_autocast(*devices)
    try:
        with independent_of_imports():  # a Hypothesis test's draws: the seed's, whatever ran before
            result = yield
    finally:
        after = snapshot_autocast(*devices)
        leaked = before.differences(after)
        if leaked:
            restore_autocast(before)
    if leaked:
        expect(
            target,
            Observation(
                case_of(item),
                registry.LEAKED_STATE,
                "the test left the autocast state different from how it found it",
                "the state it found",
                "; ".join(leaked),
                facts={"test": item.nodeid},
                reproduce=rerun_command(item),
            ),
        )
    return result


def case_of(item: pytest.Item) -> Case[Any]:
    """The test's case: its ``case`` parameter, else its category (marker), device and dtype."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if isinstance(params.get("case"), Case):
        return params["case"]
    target = target_of(item.config)
    category = next((m.name for m in item.iter_markers() if m.name in registry.BY_NAME), "")
    lower = params.get("lower")
    return Case(category, target.device, lower if isinstance(lower, torch.dtype) else None)


def rerun_command(item: pytest.Item) -> str:
    """The command that runs this one test again with the run's target options and plugins."""
    opts = options_of(item.config)
    flags = [f"--backend {opts.backend}" if opts.backend else ""]
    flags += [f"--dtype {opts.dtype}" if opts.dtype else ""]
    flags += [f"--spec {shlex.quote(s)}" for s in opts.spec]
    flags += [f"--op {shlex.quote(op)}" for op in opts.ops]
    flags += [f"--reference-device {opts.reference_device}" if opts.reference_device else ""]
    flags += ["--policy-only" if opts.policy_only else ""]
    flags += [f"--implementation {opts.implementation}" if opts.implementation != "native" else ""]
    flags += [f"--mode {m}" for m in opts.modes]
    flags += [f"--compile-backend {b}" for b in opts.compile_backends]
    plugins = item.config.getoption("plugins") or []
    flags += [f"-p {p}" for p in plugins if not p.startswith("no:")]
    return " ".join(["python -m pytest", shlex.quote(item.nodeid), *(f for f in flags if f)])


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Target:
    return target_of(request.config)


@pytest.fixture
def native_autocast(target: Target, lower: torch.dtype) -> None:
    """Skip unless the autocast under test really enables on this backend here (context tests need it)."""
    require_autocast(target, lower)

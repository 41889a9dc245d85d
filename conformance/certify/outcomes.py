"""Per-test statuses: a vendor's expectations applied to each test's reports.

:class:`Outcomes` runs where the tests run: in the pytest process of a normal run
given ``--expectations``, and in every xdist worker of a certification. Each
test's teardown report carries its bundle status and note as user properties
(``certify_status``, ``certify_note``); under xdist they travel to the
controller with the report, where :mod:`.recorder` writes them down. The
decisions themselves are the pure functions of :mod:`.expectations`.
"""

from __future__ import annotations

import os
import random
from collections.abc import Generator, Sequence
from typing import Any

import numpy
import pytest
import torch
from hypothesis import settings

from conformance.errors import usage_error
from conformance.kit.hypothesis import force_derandomize

from .expectations import (
    Expectation,
    Expectations,
    Failure,
    mandatory_violations,
    other_device_entries,
    stale_entries,
    status_of,
)
from .identity import CollectedTest, backend_of, collected_test, mandatory_core, stable_id

STATUS_PROPERTY = "certify_status"
NOTE_PROPERTY = "certify_note"
SEED = 0
HYPOTHESIS_PROFILE = "autocast-certify"
NO_RESULT = ("fail", "the test produced no result")

_STATUS = pytest.StashKey[tuple[str, str]]()
_EXPECTATION = pytest.StashKey[Expectation | None]()


def check_mandatory(config: pytest.Config, exp: Expectations, tests: Sequence[CollectedTest]) -> None:
    """Stop the run (exit 2, file:line) when an entry would excuse a test of the mandatory core."""
    if not exp.entries:
        return
    core = mandatory_core(config)
    probs = mandatory_violations(exp, {t.id: t.category for t in tests}, core, backend_of(config))
    if probs:
        usage_error("--expectations: " + "\n".join(str(p) for p in probs))


def mark_declared(items: Sequence[pytest.Item], exp: Expectations, device: str | None) -> None:
    """Skip (without running) tests declared skip or not-supported; remember each test's entry."""
    for item in items:
        e = exp.for_test(stable_id(item), device)
        item.stash[_EXPECTATION] = e
        if e is not None and e.status in ("skip", "not-supported"):
            item.add_marker(pytest.mark.skip(reason=f"{e.status}: {e.reason} ({e.where})"))


def report_stale(tr: Any, stale: Sequence[Expectation], elsewhere: Sequence[Expectation]) -> None:
    if stale:
        tr.write_sep("-", f"{len(stale)} stale expectation(s): they match no test")
        for e in stale:
            tr.write_line(f"{e.where}: {e.status} {e.match!r} matches no collected test")
    if elsewhere:
        tr.write_line(f"({len(elsewhere)} expectation(s) are for other devices and were not applied)")


def fix_randomness(config: pytest.Config) -> None:
    """Derandomized Hypothesis without an example database; the hash seed of the workers."""
    os.environ["PYTHONHASHSEED"] = str(SEED)  # the xdist workers start after this
    force_derandomize(config)  # the suite's Hypothesis tests read their settings from the config
    settings.register_profile(HYPOTHESIS_PROFILE, derandomize=True, database=None, print_blob=True)
    settings.load_profile(HYPOTHESIS_PROFILE)


def seed_everything(device: str | None) -> None:
    """Fixed seeds before each certified test: Python, NumPy, torch's CPU generator, and the
    device's own generators once the device is initialized.

    Not ``torch.manual_seed``: it seeds every accelerator torch knows (cuda, xpu, mtia) as well,
    and for each one not initialized it formats the caller's stack to queue the call (about
    0.5 ms per test at the suite's stack depth, measured on torch 2.13). A device first used
    during a test starts from its own fixed default seed."""
    random.seed(SEED)
    numpy.random.seed(SEED)
    torch.default_generator.manual_seed(SEED)
    module = getattr(torch, device, None) if device and device != "cpu" else None
    seed = getattr(module, "manual_seed_all", None) or getattr(module, "manual_seed", None)
    initialized = getattr(module, "is_initialized", None)
    if seed is not None and (initialized is None or initialized()):
        seed(SEED)


def _failure(call: pytest.CallInfo[None]) -> Failure | None:
    if call.excinfo is None:
        return None
    exc = call.excinfo.value
    names: list[str] = []
    for cls in type(exc).__mro__:
        names += [cls.__name__, f"{cls.__module__}.{cls.__qualname__}"]
    return Failure(tuple(names), str(exc))


def _rewrite(rep: pytest.TestReport, status: str, note: str) -> None:
    """Make pytest's own outcome agree with the status (so -x, exit codes and JUnit agree)."""
    if status in ("xfail", "waived") and rep.outcome == "failed":
        rep.outcome = "skipped"
        rep.wasxfail = f"{status}: {note}"
    elif status == "unexpected-pass":
        rep.outcome = "failed"
        rep.longrepr = f"[unexpected pass] {note}"


class Outcomes:
    """Applies expectations to each test's reports and puts its bundle status on the last one.

    ``certifying``: in a certification worker, where the controller has already
    checked the collected list; tests get fixed seeds.
    """

    def __init__(self, config: pytest.Config, exp: Expectations, certifying: bool) -> None:
        self.exp = exp
        self.certifying = certifying
        self.device = backend_of(config)
        self.stale: list[Expectation] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not self.certifying:
            tests = [collected_test(it) for it in items]
            check_mandatory(config, self.exp, tests)
            self.stale = stale_entries(self.exp, [t.id for t in tests], self.device)
        mark_declared(items, self.exp, self.device)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.certifying:
            seed_everything(self.device)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, None]:
        result = yield
        rep: pytest.TestReport = result.get_result()
        e = item.stash.get(_EXPECTATION, None)
        if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed"):
            status, note = status_of(rep.outcome, e, _failure(call), getattr(rep, "wasxfail", None))
            item.stash[_STATUS] = (status, note)
            _rewrite(rep, status, note)
        elif rep.when == "teardown" and rep.outcome == "failed":
            item.stash[_STATUS] = ("fail", "teardown failed")
        if rep.when == "teardown":
            status, note = item.stash.get(_STATUS, NO_RESULT)
            rep.user_properties.append((STATUS_PROPERTY, status))
            if note:
                rep.user_properties.append((NOTE_PROPERTY, note))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.certifying:
            report_stale(terminalreporter, self.stale, other_device_entries(self.exp, self.device))

from __future__ import annotations

import warnings

import pytest

from reference_impl.spec.loader import load_spec
from reference_impl.spec.model import Spec

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")


@pytest.fixture(scope="session")
def spec() -> Spec:
    return load_spec()


# ---------------------------------------------------------------------------
# The mutation score (tests/test_mutation.py), tallied on the controller so that
# it is right under pytest-xdist too.
# ---------------------------------------------------------------------------

_MUTANTS: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "test_mutant_is_killed[" in report.nodeid and (report.when == "call" or report.outcome != "passed"):
        _MUTANTS[report.nodeid] = report.outcome


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _MUTANTS:
        killed = sum(1 for outcome in _MUTANTS.values() if outcome == "passed")
        terminalreporter.write_line(f"mutation score: {killed}/{len(_MUTANTS)} killed")

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import find, settings

from autocast_spec.model import Spec
from reference_impl.programs import Program, programs
from reference_impl.spectools.installed_spec import load_installed_spec

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

# About 150 suite runs in subprocesses (mutants, real bugs) each import the project and
# rewrite its asserts: with PYTHONDONTWRITEBYTECODE set (as on some CI hosts) every one
# compiles them again (about 1.2 s of CPU a run). The children keep their bytecode in a
# directory of their own under the temporary directory, never beside the sources.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None and "PYTHONPYCACHEPREFIX" not in os.environ:
    os.environ["PYTHONPYCACHEPREFIX"] = str(
        Path(tempfile.gettempdir()) / f"autocast-conformance-pyc-{os.getuid()}"
    )
# The tests run as two xdist workers, most of them starting suite runs in subprocesses beside
# them: always more busy processes than cores on the 2-core host. torch's OpenMP pool (one
# thread per core by default) then spins waiting for threads that have no core: two eager
# `--dtype all` suite runs side by side took 67 s with the default and 39 s with one thread
# each (62.6 s and 34.7 s of user CPU), with the same outcomes. The suite's tensors are small;
# one run alone takes the same time with one thread as with two. The workers and every
# subprocess inherit the variable; this process has imported torch already (the plugin).
if "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def spec() -> Spec:
    return load_installed_spec()


@pytest.fixture(scope="session")
def shrunk(spec: Spec) -> Program:
    """The generated program Hypothesis shrinks toward on cpu (derandomized: the same each run):
    one op in a region of its own."""
    return find(programs(spec, "cpu"), lambda p: True, settings=settings(derandomize=True, deadline=None))


# ---------------------------------------------------------------------------
# The mutation score (tests/test_mutation.py), tallied on the controller so that
# it is right under pytest-xdist too.
# ---------------------------------------------------------------------------

_MUTANTS: dict[str, str] = {}
# The real-bug score (tests/test_realbugs.py): caught = passed; xfails say why not.
_REALBUGS: dict[str, tuple[str, str]] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    final = report.when == "call" or report.outcome != "passed"
    if "test_mutant_is_killed[" in report.nodeid and final:
        _MUTANTS[report.nodeid] = report.outcome
    if "test_real_bug[" in report.nodeid and final:
        _REALBUGS[report.nodeid] = (report.outcome, getattr(report, "wasxfail", ""))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _MUTANTS:
        killed = sum(1 for outcome in _MUTANTS.values() if outcome == "passed")
        terminalreporter.write_line(f"mutation score: {killed}/{len(_MUTANTS)} killed")
    if _REALBUGS:
        # as the harness scores it: entries uncatchable by design are listed apart, not scored
        apart = {n for n, (_, why) in _REALBUGS.items() if why.startswith("uncatchable: ")}
        scored = {n: r for n, r in _REALBUGS.items() if n not in apart}
        for nodeid, (outcome, why) in sorted(scored.items()):
            if outcome != "passed":
                name = nodeid.partition("[")[2].rstrip("]")
                terminalreporter.write_line(f"real bug not caught: {name}: {why or outcome}"[:300])
        caught = sum(1 for outcome, _ in scored.values() if outcome == "passed")
        more = f" ({len(apart)} more listed as uncatchable by design, with the reason)" if apart else ""
        terminalreporter.write_line(f"real bugs caught: {caught}/{len(scored)}{more}")

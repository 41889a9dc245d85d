"""A run of the suite alone leaves pytest's log capture off unless a ``--log-*`` option asks for
it (conformance/collection.py: with torch's non-propagating loggers it costs about a quarter of
an eager run); a session that also runs another project's tests keeps it."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from helpers.suite_runs import ROOT, run_suite, summary, with_tests_on_path

Completed = subprocess.CompletedProcess[str]

# one quick test of the suite, "-p helpers.log_capture_probe" saying; with an ini file of no options
# (this repository's addopts has "-p no:logging")
ONE = ("--backend", "cpu", "-p", "helpers.log_capture_probe")
SUITE_TEST = "test_registration and aten::mm]"


def run(tmp_path: Path, *args: str, paths: Sequence[str] = ("conformance",)) -> Completed:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    ini = ("-c", str(tmp_path / "pytest.ini"), "--rootdir", str(ROOT))
    return run_suite(*ONE, *ini, *args, env_extra=with_tests_on_path(), paths=paths)


@pytest.mark.parametrize(
    "extra, registered",
    [((), False), (("--log-level", "INFO"), True), (("-o", "log_cli=true"), True)],
    ids=["no option", "--log-level", "log_cli"],
)
def test_log_capture_is_off_for_the_suite_unless_asked_for(
    extra: tuple[str, ...], registered: bool, tmp_path: Path
) -> None:
    p = run(tmp_path, "-k", SUITE_TEST, *extra)
    assert p.returncode == 0 and "1 passed" in p.stdout, summary(p)
    assert f"log capture registered: {registered}" in p.stdout, summary(p)


def test_another_projects_tests_in_the_session_keep_it(tmp_path: Path) -> None:
    theirs = tmp_path / "test_theirs.py"
    theirs.write_text("def test_theirs():\n    pass\n")
    p = run(tmp_path, "-k", f"({SUITE_TEST}) or test_theirs", paths=("conformance", str(theirs)))
    assert p.returncode == 0 and "2 passed" in p.stdout, summary(p)
    assert "log capture registered: True" in p.stdout, summary(p)

"""Running the conformance suite in a subprocess, as a user would, and reading its outcomes.

Shared by the suite tests, the self-conformance tests, the mutation harness and the
real-bug harness (:class:`SuiteRun`, :func:`run_injected`: a selection run with a
deviation installed by a ``-p`` plugin named in an environment variable, forked from a
warm process (helpers/warm.py); the helpers of
the tables in docs/proving.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from helpers import warm

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def run_suite(
    *args: str,
    env_extra: Mapping[str, str] | None = None,
    plugin_env: Mapping[str, str] | None = None,
    timeout: int = 900,
    paths: Sequence[str] = ("conformance",),
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest <paths> -q <args>`` from the repository root.

    ``plugin_env``: variables read only by ``-p`` plugins of the run, at their import.
    A run on one process whose other environment only extends ``PYTHONPATH`` is forked
    from a warm process (helpers/warm.py: torch, pytest and the project imported once); one
    with ``-n`` (pytest-xdist starts fresh workers) or another environment is a fresh
    interpreter.
    """
    pytest_args = [*paths, "-q", "-p", "no:cacheprovider", *args]
    env = {**(plugin_env or {}), **(env_extra or {})}
    if "-n" not in args and set(env_extra or {}) <= {"PYTHONPATH"}:
        return warm.run(pytest_args, env, timeout=timeout)
    cmd = [sys.executable, "-m", "pytest", *pytest_args]
    return subprocess.run(
        cmd, cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout
    )


def run_planted(
    tmp_path: Path, plugin: str, source: str, *args: str, paths: Sequence[str] = ("conformance",)
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The suite (``paths``) with ``source`` (a deviation: a wrong kernel, compiler or alias)
    written to ``tmp_path/<plugin>.py`` and loaded with ``-p plugin``; the run and its outcomes."""
    (tmp_path / f"{plugin}.py").write_text(textwrap.dedent(source))
    xml = tmp_path / f"{plugin}.xml"
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    p = run_suite(*args, "-p", plugin, f"--junitxml={xml}", env_extra={"PYTHONPATH": path}, paths=paths)
    return p, outcomes(xml) if xml.exists() else {}


def with_tests_on_path(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment in which helper plugins under ``tests/`` load with ``-p``."""
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    return {**(env or {}), "PYTHONPATH": path}


def outcomes(xml_path: Path) -> dict[str, str]:
    """Test id -> passed | failure | error | skipped, from a JUnit XML file."""
    out = {}
    for tc in ET.parse(xml_path).getroot().iter("testcase"):
        kind = "passed"
        for child in tc:
            if child.tag in ("failure", "error", "skipped"):
                kind = child.tag
        out[f"{tc.get('classname')}::{tc.get('name')}"] = kind
    return out


def skip_reasons(xml_path: Path) -> dict[str, str]:
    """Test id -> the reason it was skipped, from a JUnit XML file."""
    out = {}
    for tc in ET.parse(xml_path).getroot().iter("testcase"):
        for child in tc:
            if child.tag == "skipped":
                out[f"{tc.get('classname')}::{tc.get('name')}"] = child.get("message", "")
    return out


def summary(p: subprocess.CompletedProcess[str]) -> str:
    """The end of a run's output: pytest's own (stdout: the failures' short summary and the
    counts) before the end of stderr, which torch's error logs can fill."""
    out = p.stdout.strip().splitlines()[-25:]
    err = p.stderr.strip().splitlines()[-10:]
    return "\n".join([*out, *(["--- stderr:"] if err else []), *err])


# Hypothesis tests pick their examples at random; tables name deterministic failures.
NONDETERMINISTIC = ("test_hypothesis.py",)


@dataclass(frozen=True)
class SuiteRun:
    """One run of a suite selection, with a deviation installed (``injected``) or without."""

    selection: tuple[str, ...]
    injected: str | None  # the mutant or real-bug id, None for the clean run
    returncode: int
    results: dict[str, str]  # test id -> passed | failure | error | skipped
    tail: str  # the end of the output, for failure messages
    plugin: str = ""  # the -p plugin that installs the deviation
    env_var: str = ""  # the environment variable naming it
    reasons: dict[str, str] = field(default_factory=dict)  # skipped/xfailed test id -> its reason

    @property
    def killed(self) -> bool:
        """Tests failed (exit 1 with failures): not a crash, a usage error or an empty run."""
        return self.returncode == 1 and any(r == "failure" for r in self.results.values())

    @property
    def failed(self) -> list[str]:
        return sorted(t for t, r in self.results.items() if r in ("failure", "error"))

    @property
    def passed(self) -> list[str]:
        return sorted(t for t, r in self.results.items() if r == "passed")

    def xfailed_with(self, prefix: str, *containing: str) -> list[str]:
        """Tests reported xfail with a reason starting ``prefix`` and holding each of
        ``containing`` (short ids)."""
        return sorted(
            short(t)
            for t, why in self.reasons.items()
            if why.startswith(prefix) and all(c in why for c in containing)
        )

    def killers(self) -> list[str]:
        """The failed tests that fail whatever the random draw (short ids)."""
        return [short(t) for t in self.failed if not any(n in t for n in NONDETERMINISTIC)]

    def repro(self) -> str:
        env = f"{self.env_var}={self.injected} " if self.injected else ""
        sel = " ".join(repr(a) if " " in a else a for a in self.selection)
        return f"cd <repo> && {env}PYTHONPATH=tests python -m pytest {sel} -p {self.plugin}\n{self.tail}"


def short(test_id: str) -> str:
    """``conformance.test_op_policy::test_op_policy[...]`` -> ``test_op_policy[...]``."""
    name, bracket, params = test_id.partition("[")
    return name.rpartition("::")[2] + bracket + params


def suite_selection(options: Sequence[str], files: Sequence[str], keyword: str | None) -> tuple[str, ...]:
    """Suite arguments: ``conformance/<file>`` paths, the options, and ``-k keyword`` if any."""
    paths = tuple(f"conformance/{f}" for f in files)
    return (*paths, *options, *(("-k", keyword) if keyword else ()))


def run_injected(selection: Sequence[str], injected: str | None, *, plugin: str, env_var: str) -> SuiteRun:
    """Run ``selection`` with ``-p plugin``; ``env_var=injected`` names the deviation (empty: none)."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        env = with_tests_on_path({env_var: injected or ""})
        args = ("-q", "-p", "no:cacheprovider", *selection, "-p", plugin, f"--junitxml={xml}")
        p = warm.run(args, env, timeout=900)
        results = outcomes(xml) if xml.exists() else {}
        reasons = skip_reasons(xml) if xml.exists() else {}
    return SuiteRun(tuple(selection), injected, p.returncode, results, summary(p), plugin, env_var, reasons)


# The tables of mutants and real bugs, with the text around them.
TABLES = ROOT / "docs" / "proving.md"


def table_rows(start: str, end: str, columns: int) -> dict[str, list[str]]:
    """Rows of the docs table between ``start`` and ``end``: first cell's id -> the
    backticked names in the last cell."""
    block = table_block(start, end)
    rows = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == columns and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = re.findall(r"`([^`]+)`", cells[-1])
    return rows


def table_block(start: str, end: str) -> str:
    """The text between the markers (empty when they are missing)."""
    text = TABLES.read_text(encoding="utf-8")
    if start not in text or end not in text:
        return ""
    return text.split(start, 1)[1].split(end, 1)[0]


def replace_table_block(start: str, end: str, body: str) -> None:
    text = TABLES.read_text(encoding="utf-8")
    if start not in text or end not in text:
        raise SystemExit(f"{TABLES.relative_to(ROOT)} has no {start} ... {end} block to update")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    TABLES.write_text(f"{head}{start}\n{body}{end}{tail}", encoding="utf-8")

"""Running the conformance suite in a subprocess, as a user would, and reading its outcomes.

Shared by the suite tests, the self-conformance tests and the mutation harness.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def run_suite(
    *args: str,
    env_extra: Mapping[str, str] | None = None,
    timeout: int = 900,
    paths: Sequence[str] = ("conformance",),
) -> subprocess.CompletedProcess[str]:
    """``python -m pytest <paths> -q <args>`` from the repository root."""
    env = {**os.environ, **(env_extra or {})}
    cmd = [sys.executable, "-m", "pytest", *paths, "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


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
    return "\n".join((p.stdout + p.stderr).strip().splitlines()[-25:])

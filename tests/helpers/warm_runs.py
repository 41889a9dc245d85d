"""Certifications and ``verify-bundle`` forked from the warm server (helpers/warm.py), as :class:`Run`.

A fresh interpreter spends about 5 s of CPU importing torch and the suite before it does
anything; the warm server has imported them once. Only the run's own process forks from it:
a certification's xdist workers, and the test-list regeneration of ``verify-bundle``, are fresh
processes as always. ``env`` may hold ``PYTHONPATH`` and variables that only the run's own
modules read (a ``-p`` plugin or a vendor's module, imported in the forked child): nothing the
warm server imported reads them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from helpers import warm
from helpers.certify_helpers import Run

ROOT = Path(__file__).resolve().parents[2]


def as_run(p: subprocess.CompletedProcess[str]) -> Run:
    return Run([str(a) for a in p.args], ROOT, p.returncode, p.stdout + p.stderr)


def pytest_run(args: Sequence[str], env: Mapping[str, str], timeout: float = 1500) -> Run:
    """``python -m pytest -p no:cacheprovider -q <args>``, from the repository root."""
    return as_run(warm.run(["-p", "no:cacheprovider", "-q", *args], env, timeout))


def verify_run(bundle: Path, env: Mapping[str, str]) -> Run:
    """``python -m conformance.cli verify-bundle <bundle>``, from the repository root."""
    return as_run(warm.run(["verify-bundle", str(bundle)], env, 900, module="conformance.cli"))

"""Shared helpers of the certification tests: run a certification, verify a bundle, read results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
VENDOR_DIR = REPO / "tests" / "vendor_npu"


@dataclass
class Run:
    cmd: list[str]
    cwd: Path
    rc: int
    out: str

    def repro(self) -> str:
        return f"cd {self.cwd} && {' '.join(self.cmd)}\n--- exit {self.rc}; output tail:\n{self.out[-4000:]}"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def pytest_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]


def start(cmd: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str], cwd: Path, timeout: float = 1500) -> Run:
    out, _ = proc.communicate(timeout=timeout)
    return Run([str(a) for a in proc.args], cwd, proc.returncode, out)  # type: ignore[union-attr]


def run(cmd: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 1500) -> Run:
    return finish(start(cmd, cwd, env), cwd, timeout)


def verify(bundle: Path, cwd: Path, env: Mapping[str, str] | None = None) -> Run:
    cmd = [sys.executable, "-m", "conformance.cli", "verify-bundle", str(bundle)]
    return run(cmd, cwd, env, timeout=900)


def results(bundle: Path) -> dict[str, dict[str, Any]]:
    data = json.loads((bundle / "results.json").read_text())
    return {r["id"]: r for r in data["tests"]}


def certification(bundle: Path) -> dict[str, Any]:
    return json.loads((bundle / "certification.json").read_text())  # type: ignore[no-any-return]


def with_status(res: Mapping[str, Mapping[str, Any]], status: str) -> list[str]:
    return sorted(i for i, r in res.items() if r["status"] == status)

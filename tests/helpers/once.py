"""A module fixture's costly work done once per test run, also under pytest-xdist.

A module-scoped fixture runs in every xdist worker that gets one of the module's tests, so a
fixture that certifies a suite in subprocesses ran twice under ``-n 2`` (about 95 s of
duplicated CPU for tests/test_vendor_npu.py alone). Here the first worker to ask does the
work in a directory both workers can see; the others wait on a lock and read its record. It is
pytest-xdist's documented pattern ("Making session-scoped fixtures execute only once"), with
``filelock``, which torch itself depends on.

The work returns :class:`Run` records (the subprocesses it ran), kept as JSON beside its
directory. Work that raises leaves no record: the next worker does it again and fails alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest
from filelock import FileLock

from helpers.certify_helpers import Run


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The run's temporary root: shared by every xdist worker (each has its own subfolder)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_run(
    factory: pytest.TempPathFactory, name: str, work: Callable[[Path], dict[str, Run]]
) -> tuple[Path, dict[str, Run]]:
    """``work(directory)`` once per test run; every caller gets the directory and the runs."""
    root = shared_root(factory)
    where, record = root / name, root / f"{name}.runs.json"
    with FileLock(str(root / f"{name}.lock")):
        if record.is_file():
            kept = json.loads(record.read_text())
            return where, {k: Run(v["cmd"], Path(v["cwd"]), v["rc"], v["out"]) for k, v in kept.items()}
        where.mkdir(exist_ok=True)
        runs = work(where)
        record.write_text(json.dumps({k: {**asdict(r), "cwd": str(r.cwd)} for k, r in runs.items()}))
        return where, runs

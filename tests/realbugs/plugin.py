"""pytest plugin for a real bug's suite run: ``-p realbugs.plugin`` with ``AUTOCAST_REALBUG=<id>``.

It installs the entry's replay when pytest configures, before collection. Without the
variable it does nothing (the clean run of the same selection loads it too).
"""

from __future__ import annotations

import os

import pytest

ENV = "AUTOCAST_REALBUG"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    name = os.environ.get(ENV)
    if not name:
        return
    from .corpus import BY_ID
    from .registry import registered

    REPLAYS, _ = registered()

    entry = BY_ID.get(name)
    if entry is None or entry.replay is None:
        raise pytest.UsageError(f"{ENV}={name}: no replayable entry (see tests/realbugs/corpus.yaml)")
    REPLAYS[entry.replay]()


def pytest_report_header(config: pytest.Config) -> str | None:
    name = os.environ.get(ENV)
    return f"autocast real bug replayed: {name}" if name else None

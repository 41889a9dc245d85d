"""pytest plugin for a mutant's suite run: ``-p mutation.plugin`` with ``AUTOCAST_MUTANT=<id>``.

It installs the mutant when pytest configures, before collection, so every test of
the run meets the mutated backend. Without the variable it does nothing (the
unmutated run of the same selection loads it too, so both runs differ only in the
mutant).
"""

from __future__ import annotations

import os

import pytest

ENV = "AUTOCAST_MUTANT"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    name = os.environ.get(ENV)
    if not name:
        return
    from .catalogue import BY_ID

    mutant = BY_ID.get(name)
    if mutant is None:
        raise pytest.UsageError(f"{ENV}={name}: no such mutant (see tests/mutation/catalogue/)")
    mutant.install()


def pytest_report_header(config: pytest.Config) -> str | None:
    name = os.environ.get(ENV)
    return f"autocast mutant: {name}" if name else None

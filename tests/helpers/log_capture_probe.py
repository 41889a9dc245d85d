"""``-p helpers.log_capture_probe``: says, once the tests are about to run, whether pytest's log
capture is registered (tests/test_log_capture.py)."""

from __future__ import annotations

import pytest


def pytest_runtestloop(session: pytest.Session) -> None:
    registered = session.config.pluginmanager.get_plugin("logging-plugin") is not None
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    reporter.write_line(f"log capture registered: {registered}")

"""The pytest sub-plugin behind ``--mode`` (listed in ``conformance.plugin``).

It adds

* ``--mode eager|script|trace|compile`` (repeatable; default ``eager``),
* ``--compile-backend aot_eager|inductor|...`` (default ``aot_eager``: no C++ toolchain),
* a terminal-summary line counting the declared divergences reported xfail.
"""

from __future__ import annotations

from typing import Any

import pytest

from .ops import DECLARED
from .run import DEFAULT_COMPILE_BACKEND, MODES


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("autocast-modes", "autocast execution modes")
    group.addoption(
        "--mode",
        action="append",
        choices=MODES,
        default=None,
        help="run the op policy checks through this mode (repeatable; default: eager)",
    )
    group.addoption(
        "--compile-backend",
        default=DEFAULT_COMPILE_BACKEND,
        help="torch.compile backend for --mode compile (default aot_eager; inductor needs a C++ compiler)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With only eager selected there is nothing to compare: drop the per-op mode checks."""
    if any(m != "eager" for m in selected_modes(config)):
        return
    dropped = [i for i in items if getattr(i, "originalname", "") == "test_mode_matches_eager"]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


def selected_modes(config: pytest.Config) -> tuple[str, ...]:
    chosen = config.getoption("--mode", default=None) or ["eager"]
    return tuple(dict.fromkeys(chosen))


def compile_backend(config: pytest.Config) -> str:
    return str(config.getoption("--compile-backend", default=DEFAULT_COMPILE_BACKEND))


def declared_counts(terminalreporter: Any) -> dict[str, int]:
    """Per mode, the xfailed reports of declared divergences (read in the xdist controller too)."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("xfailed", []):
        reason = str(getattr(report, "wasxfail", ""))
        if reason.startswith(DECLARED):
            mode = reason.removeprefix(DECLARED).split(" ", 1)[0]
            counts[mode] = counts.get(mode, 0) + 1
    return counts


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    modes = [m for m in selected_modes(config) if m != "eager"]
    if not modes:
        return
    counts = declared_counts(terminalreporter)
    parts = ", ".join(f"{m} {counts.get(m, 0)}" for m in modes)
    terminalreporter.write_sep("-", "autocast execution modes")
    terminalreporter.write_line(
        f"declared divergences from eager autocast (spec/jit.yaml mode_divergences), reported xfail: {parts}"
    )
    if "compile" in modes:
        terminalreporter.write_line(f"torch.compile backend: {compile_backend(config)}")

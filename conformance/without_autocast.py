"""A backend without autocast (``no_autocast``): the tests it cannot have are deselected.

Such a backend has no dtype to test, so every test parametrized by dtype, op or policy has an
empty parameter set, which pytest would keep as one ``[NOTSET]`` test skipped as "got empty
parameter set": in the mandatory core (context, threads, eligibility, registration) a skip that
refuses certification, for checks that do not exist here. They are deselected instead, with a
line that says why; what such a backend owes is checked by ``test_no_autocast``
(categories/context.py).
"""

from __future__ import annotations

import pytest

from .session import TARGET_KEY


def _empty(item: pytest.Item) -> bool:
    return any(
        m.name == "skip" and "got empty parameter set" in str(m.kwargs.get("reason", m.args))
        for m in item.iter_markers()
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    target = config.stash.get(TARGET_KEY, None)
    if target is None or target.device_spec.no_autocast is None:
        return
    gone = [i for i in items if _empty(i)]
    if not gone:
        return
    items[:] = [i for i in items if not _empty(i)]
    config.hook.pytest_deselected(items=gone)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        na = target.device_spec.no_autocast
        reporter.write_line(
            f"autocast conformance: {target.device} has no autocast ({na.loc}): {len(gone)} tests that need "
            "an autocast dtype are deselected; test_no_autocast checks what it owes"
        )

"""Tests a backend cannot have are deselected, not skipped.

A test whose parametrization is empty stays in pytest's run as one ``[NOTSET]`` test skipped as
"got empty parameter set"; in the mandatory core (context, threads, eligibility, registration)
such a skip refuses certification, for a check that does not exist here. Deselected instead:

- on a backend without autocast (``no_autocast``: no dtype to test), every test with an empty
  parameter set; a line says why, and ``test_no_autocast`` checks what it owes;
- on any backend, the tests of a category whose cases exist only where the device file declares
  them (``Category.only_where_declared``: ``no_autocast``, a backend without autocast;
  ``higher_order``, a backend with Python Autocast kernels of higher-order operators).
"""

from __future__ import annotations

import pytest

from .registry import category_of
from .session import TARGET_KEY


def _empty(item: pytest.Item) -> bool:
    return any(
        m.name == "skip" and "got empty parameter set" in str(m.kwargs.get("reason", m.args))
        for m in item.iter_markers()
    )


def _declared_only(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("conformance_cases")
    return marker is not None and bool(marker.args) and category_of(marker.args[0]).only_where_declared


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    target = config.stash.get(TARGET_KEY, None)
    if target is None:
        return
    none = target.device_spec.no_autocast
    gone = [i for i in items if _empty(i) and (none is not None or _declared_only(i))]
    if not gone:
        return
    kept = set(map(id, gone))
    items[:] = [i for i in items if id(i) not in kept]
    config.hook.pytest_deselected(items=gone)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and none is not None:
        reporter.write_line(
            f"autocast conformance: {target.device} has no autocast ({none.loc}): {len(gone)} tests that "
            "need an autocast dtype are deselected; test_no_autocast checks what it owes"
        )

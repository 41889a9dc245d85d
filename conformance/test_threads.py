"""Thread-local autocast state (rules.context.thread_local, new_thread_enabled).

Every field the context rules name (enabled, dtype, cache flag, nesting) is read in a
new thread started while the parent is inside a region and after it; and the parent's
state is read while a child thread sits in its own region.
"""

from __future__ import annotations

import pytest

from conformance.assertions import assert_scenario
from conformance.cases import Case
from conformance.semantic_checks import thread_scenario
from conformance.sentinel import require_autocast
from conformance.target import Target
from reference_impl.dtypes import dtype_of


@pytest.mark.conformance_cases("threads")
def test_thread_state(target: Target, case: Case) -> None:
    require_autocast(target, dtype_of(case.dtype))
    r = thread_scenario(target, case)
    assert_scenario(
        case,
        "thread-local autocast state differs from the spec",
        r.expected,
        r.observed,
        None,
        r.steps,
        r.rule,
    )

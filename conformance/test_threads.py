"""threads: thread-local autocast state in a new thread (categories/threads.py)."""

from __future__ import annotations

import pytest

from conformance.categories import threads
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("threads")
def test_thread_state(target: Target, case: Case) -> None:
    expect(target, threads.state(target, case))

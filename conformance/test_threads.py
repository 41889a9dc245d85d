"""The threads category's tests: conformance/categories/threads.py."""

from __future__ import annotations

from conformance.categories import threads
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(threads.cases)
def test_thread_state(target: Target, case: Case) -> None:
    expect(target, threads.state(target, case))

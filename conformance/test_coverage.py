"""Every op the device spec lists yields tests in each category its policy calls for."""

from __future__ import annotations

import pytest

from conformance.registry import coverage, expected_categories
from conformance.target import Target


@pytest.mark.coverage
def test_spec_entry_has_tests(target: Target, listed_op: str) -> None:
    missing = coverage(target)[listed_op]
    if missing:
        entry = target.device_spec.ops[listed_op]
        info = target.spec.op_info(listed_op)
        why = "spec/ops/ has no samples for it" if info is None or not info.samples else "see the generators"
        pytest.fail(
            f"{listed_op} ({entry.policy}, {entry.loc}) yields no {', '.join(missing)} tests "
            f"(needs {', '.join(expected_categories(entry.policy, target.spec.rules))}): {why}",
            pytrace=False,
        )

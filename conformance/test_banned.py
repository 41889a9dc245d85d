"""Banned ops raise under autocast, with the spec's message."""

from __future__ import annotations

import pytest

from conformance.assertions import fail
from conformance.cases import Case
from conformance.checks import policy_call
from conformance.target import Target


@pytest.mark.conformance_cases("banned")
def test_banned_raises(target: Target, case: Case) -> None:
    r = policy_call(target, case, case.op)
    message = target.device_spec.ops[case.op].message or ""
    if r.native.error is None:
        fail(
            case,
            "a banned op ran under autocast",
            r.inputs,
            expected=f"an error: {message}",
            observed=", ".join(r.native.dtypes),
        )
    first_line = message.strip().splitlines()[0] if message.strip() else ""
    if first_line not in str(r.native.error):
        fail(
            case,
            "a banned op raised another message",
            r.inputs,
            expected=message,
            observed=f"{type(r.native.error).__name__}: {r.native.error}",
        )

"""banned: banned ops raise under autocast, with the spec's message (categories/banned.py)."""

from __future__ import annotations

import pytest

from conformance.categories import banned
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("banned")
def test_banned_raises(target: Target, case: Case) -> None:
    expect(target, banned.raises(target, case))

"""context, for a backend without autocast (``no_autocast``): categories/context.py."""

from __future__ import annotations

import pytest

from conformance.categories import context
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target

pytestmark = pytest.mark.context


@pytest.mark.conformance_cases("no_autocast")
def test_no_autocast(target: Target, case: Case) -> None:
    expect(target, context.no_autocast(target, case))

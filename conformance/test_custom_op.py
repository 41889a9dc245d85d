"""custom_op: torch.library.custom_op with register_autocast follows the eligibility rules
(categories/custom_op.py)."""

from __future__ import annotations

import pytest

from conformance.categories import custom_op
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("custom_op")
def test_custom_op(target: Target, case: Case) -> None:
    expect(target, custom_op.combination(target, case))

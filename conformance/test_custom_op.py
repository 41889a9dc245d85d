"""torch.library.custom_op with register_autocast (rules.custom_ops): the op's inputs are
cast under the same eligibility rules as built-in ops, on each device type the spec names.
"""

from __future__ import annotations

import pytest

from conformance.assertions import assert_scenario
from conformance.cases import Case
from conformance.custom_checks import custom_op_combination
from conformance.target import Target


@pytest.mark.conformance_cases("custom_op")
def test_custom_op(target: Target, case: Case) -> None:
    r = custom_op_combination(target, case)
    assert_scenario(
        case, "a custom op's autocast differs from the spec", r.expected, r.observed, None, r.steps, r.rule
    )

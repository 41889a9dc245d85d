"""torch.amp.custom_fwd / custom_bwd: every combination of inside/outside a region,
cast_inputs unset/float32/the autocast dtype, and inputs float16, bfloat16, float32,
float64, integer, on another device or given as a keyword; custom functions nested
in one another. Backward always runs outside the region.
"""

from __future__ import annotations

import pytest

from conformance.assertions import assert_scenario
from conformance.cases import Case
from conformance.custom_checks import custom_function_combination
from conformance.sentinel import require_autocast
from conformance.target import Target
from reference_impl.dtypes import dtype_of

pytestmark = pytest.mark.real_tensors


@pytest.mark.conformance_cases("custom_function")
def test_custom_function(target: Target, case: Case) -> None:
    require_autocast(target, dtype_of(case.dtype))
    r = custom_function_combination(target, case)
    assert_scenario(
        case, "custom_fwd/custom_bwd differ from the spec", r.expected, r.observed, None, r.steps, r.rule
    )

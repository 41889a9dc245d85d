"""The execution modes' tests: conformance/categories/modes.py, regions.py, mode_gradients.py,
mode_exceptions.py. Deselected when only eager is chosen."""

from __future__ import annotations

import pytest

from conformance.categories import mode_exceptions, mode_gradients, modes, regions
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect, expect_each
from conformance.target import Target

pytestmark = pytest.mark.mode_check


@conformance_cases(modes.cases)
def test_mode_matches_eager(target: Target, case: Case[modes.InMode]) -> None:
    expect_each(target, modes.matches_eager(target, case))


@conformance_cases(regions.cases)
def test_region_matches_eager(target: Target, case: Case[regions.Compiled]) -> None:
    expect(target, regions.matches_eager(target, case))


@conformance_cases(mode_gradients.cases)
def test_mode_gradients_match_eager(target: Target, case: Case[mode_gradients.Through]) -> None:
    expect(target, mode_gradients.gradients_match(target, case))


@conformance_cases(mode_exceptions.cases)
def test_exception_escaping_region_restores_state(
    target: Target, case: Case[mode_exceptions.Escaping]
) -> None:
    expect_each(target, mode_exceptions.escaping(target, case))

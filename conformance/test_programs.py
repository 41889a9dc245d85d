"""The programs category's tests: conformance/categories/programs.py."""

from __future__ import annotations

import pytest

from conformance.categories import programs
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.target import Target

pytestmark = pytest.mark.mode_check


@conformance_cases(programs.cases)
def test_generated_programs(target: Target, case: Case[programs.Generated]) -> None:
    programs.check(target, case)

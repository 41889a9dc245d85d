"""The call_forms category's tests: conformance/categories/call_forms.py."""

from __future__ import annotations

from conformance.categories import call_forms
from conformance.kit.case import Case
from conformance.kit.category import conformance_cases
from conformance.kit.verdict import expect
from conformance.target import Target


@conformance_cases(call_forms.cases)
def test_call_forms(target: Target, case: Case) -> None:
    expect(target, call_forms.check_case(target, case))

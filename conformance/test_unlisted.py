"""unlisted: ops the device does not list run in their input dtype (categories/unlisted.py)."""

from __future__ import annotations

import pytest

from conformance.categories import unlisted
from conformance.kit.case import Case
from conformance.kit.verdict import expect
from conformance.target import Target


@pytest.mark.conformance_cases("unlisted")
def test_unlisted(target: Target, case: Case) -> None:
    expect(target, unlisted.untouched(target, case))

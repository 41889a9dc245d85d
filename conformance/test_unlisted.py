"""Unlisted ops (catalog ops other devices list, and a registry sample) run in their input dtype."""

from __future__ import annotations

import pytest

from conformance.assertions import assert_untouched
from conformance.cases import Case
from conformance.checks import unlisted_call
from conformance.target import Target


@pytest.mark.conformance_cases("unlisted")
def test_unlisted(target: Target, case: Case) -> None:
    r = unlisted_call(target, case)
    assert_untouched(case, r.given, r.arrived, r.inputs, r.entry, r.error, r.why)

"""The transitions category's tests: conformance/categories/transitions.py."""

from __future__ import annotations

import pytest
import torch
from hypothesis.stateful import run_state_machine_as_test

from conformance.categories import transitions
from conformance.kit.hypothesis import suite_settings
from conformance.target import Target

pytestmark = [pytest.mark.transitions, pytest.mark.hypothesis, pytest.mark.real_tensors]


def test_state_transitions(target: Target, lower: torch.dtype, request: pytest.FixtureRequest) -> None:
    run_state_machine_as_test(transitions.machine(target, lower), settings=suite_settings(request.config))

"""The property-based tests of the numerics and context categories (random dtype mixes; a state
machine of regions): conformance/categories/numerics.py, context.py."""

from __future__ import annotations

import pytest
import torch
from hypothesis.stateful import run_state_machine_as_test

from conformance.categories import context, numerics
from conformance.kit.hypothesis import suite_settings
from conformance.target import Target

pytestmark = pytest.mark.hypothesis


def test_random_dtype_mixes(target: Target, lower: torch.dtype, request: pytest.FixtureRequest) -> None:
    suite_settings(request.config)(numerics.random_mixes(target, lower))()


@pytest.mark.context
@pytest.mark.usefixtures("native_autocast")
def test_state_machine(target: Target, lower: torch.dtype, request: pytest.FixtureRequest) -> None:
    run_state_machine_as_test(context.state_machine(target), settings=suite_settings(request.config))

"""Each limitation in spec/jit.yaml, reproduced by its scenario and checked against the entry
(conformance/modes/scenarios/); compile scenarios with ``--compile-backend`` (default aot_eager)."""

from __future__ import annotations

import pytest

from conformance.kit.verdict import expect
from conformance.modes import scenarios
from conformance.modes.plugin import compile_backend
from conformance.session import target_of
from conformance.target import Target

pytestmark = pytest.mark.jit


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "lim_id" in metafunc.fixturenames:
        metafunc.parametrize("lim_id", scenarios.limitation_ids(target_of(metafunc.config).spec))


def test_limitation(lim_id: str, target: Target, request: pytest.FixtureRequest) -> None:
    expect(target, scenarios.limitation(target, lim_id, compile_backend(request.config)))

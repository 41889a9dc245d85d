"""--mode script|trace|compile|export|aoti: every catalogued op of the backend through the mode against
eager autocast (conformance/modes/ops.py), small multi-op regions compiled as one graph
(modes/regions.py), gradients through a compiled region (modes/gradients.py), and the state an
exception escaping a region leaves (modes/exceptions.py). Deselected when only eager is chosen."""

from __future__ import annotations

import pytest

from conformance.kit.verdict import expect, expect_each
from conformance.modes import aoti, exceptions, export, gradients, ops, regions
from conformance.modes.plugin import compile_backend, selected_modes
from conformance.session import target_of
from conformance.target import Target

pytestmark = [pytest.mark.jit, pytest.mark.mode_check]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    target = target_of(metafunc.config)
    modes = selected_modes(metafunc.config)
    if "mode_case" in metafunc.fixturenames:
        cases = ops.mode_cases(target, modes, compile_backend(metafunc.config))
        slow = [pytest.mark.slow]  # an AOTInductor package per batch: a C++ build, minutes cold
        params = [pytest.param(c, id=c.id, marks=slow if c.mode == "aoti" else ()) for c in cases]
        metafunc.parametrize("mode_case", params)
    if "region_case" in metafunc.fixturenames:
        rcases = regions.region_cases(target, modes, compile_backend(metafunc.config))
        metafunc.parametrize("region_case", rcases, ids=[c.id for c in rcases])
    if "grad_case" in metafunc.fixturenames:
        grads = gradients.grad_cases(target) if "compile" in modes else []
        metafunc.parametrize("grad_case", grads, ids=[c.id for c in grads])


def test_mode_matches_eager(target: Target, mode_case: ops.ModeCase, request: pytest.FixtureRequest) -> None:
    if mode_case.mode == "export":
        expect_each(target, export.matches_eager(target, mode_case))
        return
    if mode_case.mode == "aoti":
        expect(target, aoti.matches_eager(target, mode_case))
        return
    expect(target, ops.matches_eager(target, mode_case, compile_backend(request.config)))


def test_region_matches_eager(
    target: Target, region_case: regions.RegionCase, request: pytest.FixtureRequest
) -> None:
    expect(target, regions.region_matches_eager(target, region_case, compile_backend(request.config)))


def test_mode_gradients_match_eager(
    target: Target, grad_case: gradients.GradCase, request: pytest.FixtureRequest
) -> None:
    expect(target, gradients.gradients_match(target, grad_case, compile_backend(request.config)))


@pytest.mark.parametrize("error", exceptions.ERRORS)
@pytest.mark.parametrize("outer", exceptions.OUTER)
def test_exception_escaping_region_restores_state(
    target: Target, request: pytest.FixtureRequest, outer: str, error: str
) -> None:
    config = request.config
    expect_each(
        target, exceptions.escaping(target, selected_modes(config), compile_backend(config), outer, error)
    )

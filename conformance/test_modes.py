"""--mode script|trace|compile: every catalogued op of the backend, run through the mode.

Each op's first sample runs under autocast eagerly and through the mode (with float32
inputs and with inputs already in the autocast dtype). Output dtypes must agree, or the
difference must be declared in spec/jit.yaml ``mode_divergences`` (then the test is an
xfail with the reason and is counted in the terminal summary). An undeclared difference,
or a declaration that no longer diverges, fails. Where eager autocast raises because the
kernel refuses the inputs natively on this host (conformance/refusal.py), the test is
skipped with the reason in every mode. Deselected when only eager is chosen.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from conformance import modes, refusal
from conformance.plugin import target_of
from conformance.target import Target
from reference_impl.samples import Materialized, dtype_of, materialize, output_tensors

pytestmark = [pytest.mark.jit, pytest.mark.mode_check]

INPUTS = ("float32", "lower")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mode_case" not in metafunc.fixturenames:
        return
    target = target_of(metafunc.config)
    chosen = [m for m in modes.selected_modes(metafunc.config) if m != "eager"]
    cases = []
    for mode in chosen:
        for dtype in target.dtypes:
            for op in sorted(target.device_spec.ops):
                if target.spec.op_info(op) is None:
                    continue
                for inputs in INPUTS:
                    cases.append(pytest.param((mode, op, dtype, inputs), id=f"{mode}-{op}-{dtype}-{inputs}"))
    metafunc.parametrize("mode_case", cases)


def _inputs(target: Target, op: str, dtype: str, inputs: str) -> Materialized:
    info = target.spec.op_info(op)
    assert info is not None
    float_dtype = torch.float32 if inputs == "float32" else dtype_of(dtype)
    return materialize(info.samples[0], float_dtype, target.device)


def _run(mode: str, target: Target, op: str, dtype: str, inputs: str, backend: str) -> Any:
    m = _inputs(target, op, dtype, inputs)
    try:
        return modes.run_in_mode(
            mode, op, m.args, m.kwargs, device=target.device, dtype=dtype_of(dtype), backend=backend
        )
    except Exception as exc:  # a mode's failure is an observation ("error")
        return exc


def _repro(mode: str, op: str, dtype: str, inputs: str) -> str:
    return f"reproduce: pytest conformance --backend <device> --mode {mode} -k '{mode}-{op}-{dtype}-{inputs}'"


def test_mode_matches_eager(
    target: Target, mode_case: tuple[str, str, str, str], request: pytest.FixtureRequest
) -> None:
    mode, op, dtype, inputs = mode_case
    if target.policy_only:
        pytest.skip("--policy-only: script/trace/compile need the backend's kernels")
    why = refusal.intercept_only(target, op)
    if why:
        pytest.skip(why)
    backend = modes.compile_backend(request.config)
    eager = _run("eager", target, op, dtype, inputs, backend)
    if isinstance(eager, BaseException):
        _when_eager_raised(target, mode_case, eager)
    got = _run(mode, target, op, dtype, inputs, backend)
    verdict = modes.judge(
        mode,
        op,
        dtype,
        inputs,
        modes.observed_label(eager),
        modes.observed_label(got),
        modes.find_divergence(target.spec, mode, op, dtype, inputs),
    )
    if verdict.status == "declared":
        pytest.xfail(f"{modes.DECLARED}{verdict.detail}")
    if not verdict.ok:
        error = f"\n  {mode} raised: {got!r}"[:400] if isinstance(got, BaseException) else ""
        pytest.fail(f"{verdict.detail}{error}\n  {_repro(mode, op, dtype, inputs)}", pytrace=False)
    info = target.spec.op_info(op)
    if isinstance(eager, BaseException) or info is None or info.nondeterministic:
        return
    tol = info.tolerance.get(dtype) or target.spec.rules.default_tolerance[dtype]
    for e, g in zip(output_tensors(eager), output_tensors(got), strict=True):
        if e.is_floating_point() or e.is_complex():
            torch.testing.assert_close(
                g.cpu(),
                e.cpu(),
                atol=tol.atol,
                rtol=tol.rtol,
                equal_nan=True,
                msg=lambda s: (
                    f"{mode} {op} ({dtype}, {inputs} inputs) values differ from eager: {s}\n  "
                    + _repro(mode, op, dtype, inputs)
                ),
            )


def _when_eager_raised(target: Target, mode_case: tuple[str, str, str, str], eager: BaseException) -> None:
    """Skip where the kernel refuses natively on this host; fail where eager autocast itself fails.

    Otherwise (the raw call raises something else, e.g. autocast refuses the call by
    policy) the mode is judged against eager's error as usual.
    """
    mode, op, dtype, inputs = mode_case
    raw = refusal.raw_call(target, dtype_of(dtype), op, _inputs(target, op, dtype, inputs))
    refusal.skip_if_refused(eager, raw)
    if raw.error is None:
        pytest.fail(
            f"{mode} {op} (autocast {dtype}, {inputs} inputs): eager autocast raised "
            f"({refusal.error_text(eager)}) but the call without autocast on the reference's cast "
            f"inputs runs: eager autocast itself fails\n  {_repro(mode, op, dtype, inputs)}",
            pytrace=False,
        )


@pytest.mark.parametrize("outer", ["off", "float16"])
def test_exception_escaping_region_restores_state(
    target: Target, request: pytest.FixtureRequest, outer: str
) -> None:
    """An exception escaping an autocast region (in each selected mode) leaves the state as before."""
    if target.policy_only:
        pytest.skip("--policy-only: script/trace/compile need the backend's kernels")
    backend = modes.compile_backend(request.config)
    dev = target.device
    a = torch.rand(4, 4, device=dev)
    bad = torch.rand(3, 5, device=dev)  # mm(a, bad) raises inside the region
    for mode in modes.selected_modes(request.config):
        with modes.restored_state(dev):
            if outer == "float16":
                torch.set_autocast_enabled(dev, True)
                torch.set_autocast_dtype(dev, torch.float16)
            before = modes.autocast_state(dev)
            with pytest.raises(Exception):  # noqa: B017 - any error from the mismatched shapes
                modes.run_in_mode(
                    mode, "torch.mm", (a, bad), device=dev, dtype=dtype_of(target.dtypes[0]), backend=backend
                )
            after = modes.autocast_state(dev)
        assert after == before, (
            f"{mode}: autocast state (enabled, dtype, cache) {before} -> {after} after an exception "
            f"escaped the region; reproduce: pytest conformance --mode {mode} -k restores_state"
        )

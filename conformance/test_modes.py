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

from conformance import mode_grads, mode_state, mode_verdict, modes, refusal
from conformance.cases import sentinel_op
from conformance.deep_checks import rebuilt
from conformance.known_bugs import judge
from conformance.mode_run import run_in_mode
from conformance.plugin import target_of
from conformance.target import Target
from reference_impl.compare import output_mismatch
from reference_impl.dtypes import dtype_of
from reference_impl.runtime import autocast_state_kept
from reference_impl.samples import Materialized, materialize, output_tensors

pytestmark = [pytest.mark.jit, pytest.mark.mode_check]

INPUTS = ("float32", "lower")
GRAD_POLICIES = ("lower_precision_fp", "fp32")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "grad_case" in metafunc.fixturenames:
        _grad_cases(metafunc)
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


def _grad_cases(metafunc: pytest.Metafunc) -> None:
    target = target_of(metafunc.config)
    cases = []
    if "compile" in modes.selected_modes(metafunc.config):
        for dtype in target.dtypes:
            for op, entry in sorted(target.device_spec.ops.items()):
                info = target.spec.op_info(op)
                runs = info is not None and info.fake_kernel and not info.intercept_only
                if entry.policy.value in GRAD_POLICIES and runs:
                    for v in mode_grads.VARIANTS:
                        cases.append(pytest.param((op, dtype, v), id=f"grad-{op}-{dtype}-{v}"))
    metafunc.parametrize("grad_case", cases)


def _inputs(target: Target, op: str, dtype: str, inputs: str) -> Materialized:
    info = target.spec.op_info(op)
    assert info is not None
    float_dtype = torch.float32 if inputs == "float32" else dtype_of(dtype)
    return materialize(info.samples[0], float_dtype, target.device)


def _run(mode: str, target: Target, op: str, dtype: str, inputs: str, backend: str) -> Any:
    m = _inputs(target, op, dtype, inputs)
    try:
        return run_in_mode(
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
    verdict = mode_verdict.judge(
        mode,
        op,
        dtype,
        inputs,
        mode_verdict.observed_label(eager),
        mode_verdict.observed_label(got),
        mode_verdict.find_divergence(target.spec, mode, op, dtype, inputs),
    )
    if verdict.status == "declared":
        pytest.xfail(f"{mode_verdict.DECLARED}{verdict.detail}")
    if not verdict.ok:
        error = f"\n  {mode} raised: {got!r}"[:400] if isinstance(got, BaseException) else ""
        pytest.fail(f"{verdict.detail}{error}\n  {_repro(mode, op, dtype, inputs)}", pytrace=False)
    info = target.spec.op_info(op)
    if isinstance(eager, BaseException) or info is None or info.nondeterministic:
        return
    tol = target.spec.tolerance(op, dtype)
    mismatch = output_mismatch(output_tensors(eager), output_tensors(got), tol, info.scratch_outputs)
    if mismatch is not None:
        pytest.fail(
            f"{mode} {op} ({dtype}, {inputs} inputs) differs from eager: {mismatch}\n  "
            + _repro(mode, op, dtype, inputs),
            pytrace=False,
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


def test_mode_gradients_match_eager(
    target: Target, grad_case: tuple[str, str, str], request: pytest.FixtureRequest
) -> None:
    """Backward through a compiled autocast region gives eager's gradients, bitwise: with the
    op in the region, and inside a nested autocast(enabled=False) (mode_grads.py)."""
    op, dtype, variant = grad_case
    if target.policy_only:
        pytest.skip("--policy-only: torch.compile needs the backend's kernels")
    lower = dtype_of(dtype)
    eager = mode_grads.gradients(target, op, lower, variant, None)
    if isinstance(eager, str):
        pytest.skip(f"not differentiable with this sample in eager: {eager}")
    backend = modes.compile_backend(request.config)
    compiled = mode_grads.gradients(target, op, lower, variant, backend)
    if isinstance(compiled, str):
        plain = mode_grads.gradients(target, op, None, variant, backend)
        if isinstance(plain, str):
            pytest.skip(f"torch.compile cannot run this sample without autocast either: {plain}")
        raw = refusal.raw_call(target, lower, op, _inputs(target, op, dtype, "lower"))
        reason = refusal.refusal(raw.error, raw)
        if reason is not None and refusal.error_text(raw.error).split(": ", 1)[-1][:200] in compiled:
            pytest.skip(f"{reason} (the compiled run computed in {dtype})")
    judge(
        target,
        "modes.gradients",
        "same gradients",
        mode_grads.compare(eager, compiled, variant),
        lambda why: pytest.fail(
            f"compile (backend {backend}): gradients of {op} ({dtype}, {variant}) differ from eager"
            f"\n  {why}\n"
            f"  reproduce: pytest conformance --backend {target.device} --mode compile "
            f"-k 'grad-{op}-{dtype}-{variant}'",
            pytrace=False,
        ),
    )


# How the exception escapes the region: a shape error (raised while tracing, under compile)
# or an index out of range (raised by the kernel at run time, inside the compiled graph).
ERRORS = ("shape", "runtime")


def _raising_call(target: Target, kind: str) -> tuple[str, Materialized]:
    """A call that raises inside the region. ``shape``: the sentinel op (a lower_precision_fp op
    of the spec taking two or more floating tensors, cases.sentinel_op) with its first sample,
    its last floating tensor one larger in every dimension, so the shapes no longer fit.
    ``runtime``: indexing a tensor out of range."""
    dev = target.device
    if kind == "runtime":
        return "Tensor.__getitem__", Materialized(
            (torch.rand(4, 4, device=dev), torch.tensor([99], device=dev)), {}
        )
    op = sentinel_op(target)
    if op is None:
        pytest.fail(
            f"the {dev} spec lists no lower_precision_fp op with samples: no call to raise in", pytrace=False
        )
    m = materialize(target.spec.ops[op].samples[0], torch.float32, dev)
    tensors = m.tensors()
    last = max(i for i, t in enumerate(tensors) if t.is_floating_point())
    tensors[last] = torch.rand([n + 1 for n in tensors[last].shape], device=dev)
    return op, rebuilt(m, tensors)


@pytest.mark.parametrize("error", ERRORS)
@pytest.mark.parametrize("outer", ["off", "float16"])
def test_exception_escaping_region_restores_state(
    target: Target, request: pytest.FixtureRequest, outer: str, error: str
) -> None:
    """An exception escaping an autocast region (in each selected mode) leaves the state as
    before: enabled, dtype, cache_enabled and the nesting depth (rules.context
    exception_restores_state; a leaked depth keeps the cast cache from ever being cleared)."""
    if target.policy_only:
        pytest.skip("--policy-only: script/trace/compile need the backend's kernels")
    dev = target.device
    fn, m = _raising_call(target, error)
    # compile: the chosen backend, and Dynamo's own graph (backend "eager"): restoring the
    # state is Dynamo's job whatever the backend
    chosen = modes.compile_backend(request.config)
    runs = [
        (mode, backend)
        for mode in modes.selected_modes(request.config)
        for backend in (dict.fromkeys((chosen, "eager")) if mode == "compile" else (chosen,))
    ]
    for mode, backend in runs:
        with autocast_state_kept(dev):
            if outer == "float16":
                torch.set_autocast_enabled(dev, True)
                torch.set_autocast_dtype(dev, torch.float16)
            before = mode_state.autocast_state(dev)
            with pytest.raises(Exception):  # noqa: B017 - any error from the bad arguments
                run_in_mode(
                    mode, fn, m.args, m.kwargs, device=dev, dtype=dtype_of(target.dtypes[0]), backend=backend
                )
            after = mode_state.autocast_state(dev)
        where = f"{mode} (backend {backend})" if mode == "compile" else mode

        def report(
            why: str, where: str = where, mode: str = mode, before: object = before, after: object = after
        ) -> None:
            pytest.fail(
                f"{where}: autocast state {mode_state.STATE_FIELDS} {before} -> {after} after an exception "
                f"({error}) escaped the region\n  {why}\n"
                f"  reproduce: pytest conformance --mode {mode} -k 'restores_state and {error}'",
                pytrace=False,
            )

        expected = "state as before"
        judge(
            target,
            "modes.exception_state",
            expected,
            mode_state.state_change(before, after) or expected,
            report,
        )

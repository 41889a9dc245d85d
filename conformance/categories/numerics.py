"""numerics: native output equals the reference oracle's (needs the backend's kernels).

Cases, per dtype under test: every sample of every listed op with samples (banned ops
aside), with the policy's discriminating input mix.

Procedure: the aten op under native autocast on the backend, and the oracle (the spec's
cast plan applied explicitly, kernels below autocast) on the reference device with the
same seeded values. The plan is decided for the backend and applied to reference-device
tensors; where the reference device has no kernel for the call (CUDA's fused RNN cells on
a CPU reference) the oracle runs on the backend.

Expectation: the same dtypes, and values bitwise equal when the reference runs on the
backend itself and the op is deterministic, else within the spec's tolerance for the op
and dtype (``rules.default_tolerance``, the catalog's ``tolerance``).

Also a Hypothesis test (:func:`random_mixes`): any listed op, any mix of float32, lower and
float64 inputs, any seed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
from hypothesis import given
from hypothesis import strategies as st

from autocast_spec.common import Tolerance
from autocast_spec.model import Policy
from reference_impl.engine.oracle import oracle_call
from reference_impl.engine.policy import AutocastState
from reference_impl.harness.samples import call
from reference_impl.harness.state import quiet

from ..kit.calls import PolicyRun, capture, decide, policy_call, run_native, run_oracle
from ..kit.case import Case, Mix, MixRole, device_needed, listed_ops
from ..kit.category import Category, owes
from ..kit.inputs import case_inputs
from ..kit.outputs import dtype_observation, value_observation
from ..kit.refusal import intercept_only
from ..kit.verdict import Observation, expect, not_applicable
from ..target import Target
from .op_policy import OUTPUT_DTYPE

VALUES = "numerics.values"


def cases(target: Target) -> list[Case[None]]:
    return [
        lo.case(target, "numerics", sample=i)
        for lo in listed_ops(target)
        for i in range(len(lo.info.samples))
    ]


CATEGORY = Category(
    "numerics",
    __doc__,
    checks=(VALUES,),
    generators=(cases,),
    owed=owes(*(p for p in Policy if p is not Policy.BANNED)),
    needs_output=True,
    runs_kernel=True,
)


def tolerance(target: Target, case: Case) -> Tolerance | None:
    """None (bitwise) when the reference runs on the backend itself and the op is deterministic."""
    info = target.spec.ops[case.op]
    if target.reference_device == target.device and not info.nondeterministic:
        return None
    return target.spec.tolerance(case.op, case.dtype_text)


def numerics_call(target: Target, case: Case) -> PolicyRun:
    """Native on the backend against the oracle on the reference device (same seeded values)."""
    lower = case.lower
    sample = target.spec.ops[case.op].samples[case.sample]
    m = case_inputs(sample, case.mix, lower, target.device, seed=case.seed)
    native = run_native(target, lower, lambda: call(case.op, m))
    d = decide(target, lower, case.op, m)
    ref_dev = target.reference_device
    if ref_dev == target.device:
        expected = run_oracle(target, lower, case.op, m, d)
    else:
        rm = case_inputs(sample, case.mix, lower, ref_dev, seed=case.seed)
        spec = target.reference_spec
        ref_spec = spec.with_device(ref_dev, spec.device(target.device))
        with quiet():
            expected = capture(
                lambda: oracle_call(
                    ref_spec, AutocastState(ref_dev, lower, True), case.op, rm.args, rm.kwargs
                )
            )
        if expected.error is not None:
            expected = run_oracle(target, lower, case.op, m, d)
    return PolicyRun(m, native, expected, d.text)


def values(target: Target, case: Case) -> Observation:
    run = numerics_call(target, case)
    return value_observation(
        case, run, VALUES, tolerance(target, case), target.spec.ops[case.op].scratch_outputs
    )


MIX_DTYPES: Mix = (torch.float32, MixRole.LOWER, torch.float64)


def random_mixes(target: Target, lower: torch.dtype) -> Callable[..., None]:
    """A Hypothesis test: any listed op, any mix of float32/lower/float64 inputs, any seed;
    native agrees with the reference (output dtypes under --policy-only, else values)."""
    pool = [
        c
        for c in cases(target)
        if c.dtype == lower and not device_needed(target, c.op) and not intercept_only(target, c.op)
    ]
    if not pool and target.selected_ops:
        not_applicable("--op selects no op this property can draw from")
    if not pool:
        shown: Case[None] = Case("numerics", target.device, lower)
        expect(target, Observation(shown, VALUES, "nothing to draw from", "a listed op with samples", "none"))

    @given(
        index=st.integers(0, len(pool) - 1),
        mix=st.lists(st.sampled_from(MIX_DTYPES), min_size=1, max_size=4).map(tuple),
        seed=st.integers(0, 2**16),
    )
    def check(index: int, mix: Mix, seed: int) -> None:
        case = replace(pool[index], mix=mix, seed=seed)
        if target.policy_only:
            run = policy_call(target, case, case.op)
            expect(target, dtype_observation(case, run, OUTPUT_DTYPE, case.op, both_raise_ok=True))
            return
        run = numerics_call(target, case)
        if run.native.error is not None and run.expected.error is not None:
            same = f"raises {type(run.expected.error).__name__}"
            got = f"raises {type(run.native.error).__name__}"
            expect(
                target,
                Observation(
                    case, VALUES, "native and the reference raise differently", same, got, run.inputs
                ),
            )
            return
        expect(
            target,
            value_observation(
                case, run, VALUES, tolerance(target, case), target.spec.ops[case.op].scratch_outputs
            ),
        )

    return check

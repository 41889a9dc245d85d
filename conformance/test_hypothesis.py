"""Property-based tests: random dtype mixes for listed ops against the reference, and a
state machine of autocast enter/exit/enable/disable/dtype changes against a model of it.

Settings come from conformance.hypothesis_profiles (certification derandomizes them).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from conformance import refusal
from conformance.assertions import assert_close_outputs, assert_same_dtypes
from conformance.cases import Case, device_needed, numerics
from conformance.checks import numerics_call, policy_call, tolerance
from conformance.hypothesis_profiles import suite_settings
from conformance.target import Target
from reference_impl.dtypes import dtype_name, dtype_of

pytestmark = pytest.mark.hypothesis

MIX_DTYPES = ("float32", "lower", "float64")


def test_random_dtype_mixes(target: Target, lower: torch.dtype, request: pytest.FixtureRequest) -> None:
    """Any listed op, any mix of float32/lower/float64 inputs, any seed: native agrees with the reference."""
    pool = [
        c
        for c in numerics(target)
        if c.dtype == dtype_name(lower)
        and not device_needed(target, c.op)
        and not refusal.intercept_only(target, c.op)
    ]
    if not pool:
        pytest.fail(f"no listed {target.device} op has samples to draw from", pytrace=False)

    @given(
        index=st.integers(0, len(pool) - 1),
        mix=st.lists(st.sampled_from(MIX_DTYPES), min_size=1, max_size=4).map(tuple),
        seed=st.integers(0, 2**16),
    )
    def check(index: int, mix: tuple[str, ...], seed: int) -> None:
        base = pool[index]
        case = Case(
            "hypothesis",
            base.device,
            base.dtype,
            base.policy,
            base.op,
            base.op,
            base.sample,
            kind="random",
            mix=mix,
            seed=seed,
        )
        if target.policy_only:
            r = policy_call(target, case, case.op)
            assert_same_dtypes(case, r.native, r.expected, r.inputs, case.op, r.plan, both_raise_ok=True)
        else:
            r = numerics_call(target, case)
            if r.native.error is not None and r.expected.error is not None:
                assert type(r.native.error) is type(r.expected.error)
                return
            tol = tolerance(target, case)
            assert_close_outputs(
                case, r.native, r.expected, r.inputs, tol, r.plan, target.spec.ops[case.op].scratch_outputs
            )

    suite_settings(request.config)(check)()


class _AutocastModel:
    """The spec's model of the thread-local state: a stack of saved (enabled, dtype)."""

    def __init__(self, enabled: bool, dtype: torch.dtype) -> None:
        self.state = (enabled, dtype)
        self.saved: list[tuple[bool, torch.dtype]] = []


def make_machine(target: Target) -> type[RuleBasedStateMachine]:
    device = target.device
    dtypes = [dtype_of(d) for d in target.device_spec.supported_dtypes]

    class AutocastStateMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = _AutocastModel(torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
            self.contexts: list[Any] = []

        @rule(enabled=st.booleans(), dtype=st.one_of(st.none(), st.sampled_from(dtypes)))
        def enter(self, enabled: bool, dtype: torch.dtype | None) -> None:
            ctx = target.autocast_impl(device, dtype=dtype, enabled=enabled)
            ctx.__enter__()
            self.contexts.append(ctx)
            self.model.saved.append(self.model.state)
            self.model.state = (enabled, dtype if dtype is not None else self.model.state[1])

        @precondition(lambda self: bool(self.contexts))
        @rule(raise_inside=st.booleans())
        def exit(self, raise_inside: bool) -> None:
            ctx = self.contexts.pop()
            if raise_inside:
                ctx.__exit__(RuntimeError, RuntimeError("inside"), None)
            else:
                ctx.__exit__(None, None, None)
            self.model.state = self.model.saved.pop()

        @precondition(lambda self: bool(self.contexts))
        @rule(enabled=st.booleans())
        def set_enabled(self, enabled: bool) -> None:
            torch.set_autocast_enabled(device, enabled)
            self.model.state = (enabled, self.model.state[1])

        @precondition(lambda self: bool(self.contexts))
        @rule(dtype=st.sampled_from(dtypes))
        def set_dtype(self, dtype: torch.dtype) -> None:
            torch.set_autocast_dtype(device, dtype)
            self.model.state = (self.model.state[0], dtype)

        @invariant()
        def matches_model(self) -> None:
            real = (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
            assert real == self.model.state, f"autocast state {real}, model {self.model.state}"

        def teardown(self) -> None:
            while self.contexts:
                self.contexts.pop().__exit__(None, None, None)
                self.model.state = self.model.saved.pop()
            assert (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)) == self.model.state

    return AutocastStateMachine


@pytest.mark.context
@pytest.mark.usefixtures("native_autocast")
def test_state_machine(target: Target, lower: torch.dtype, request: pytest.FixtureRequest) -> None:
    run_state_machine_as_test(make_machine(target), settings=suite_settings(request.config))

"""State transitions inside a region: a Hypothesis state machine over sequences of calls
and changes of state (grad mode, cache flag, nested regions with another dtype,
enabled=False and back, torch.set_autocast_dtype), checking what each call receives
(cast dtype; cached cast, fresh cast or the input itself) against the spec's model
(:mod:`conformance.transition_model`). The ops are those of the cache category.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from conformance.assertions import assert_scenario
from conformance.cases import Case
from conformance.hypothesis_profiles import suite_settings
from conformance.known_bugs import cache_key
from conformance.runner import make_inputs
from conformance.semantic_cases import transition_pool
from conformance.sentinel import Sentinel, flat_tensors, require_autocast
from conformance.target import Target
from conformance.transition_model import Frame, SpecModel
from reference_impl.dtypes import dtype_name, dtype_of
from reference_impl.samples import Materialized

pytestmark = [pytest.mark.transitions, pytest.mark.hypothesis, pytest.mark.real_tensors]

MAX_DEPTH = 6
GRAD_MODES = {"no_grad": torch.no_grad, "enable_grad": torch.enable_grad, "inference": torch.inference_mode}


def make_machine(target: Target, lower: str) -> type[RuleBasedStateMachine]:
    d = target.device
    pool = transition_pool(target, lower)
    dtypes = [dtype_of(x) for x in target.device_spec.supported_dtypes]

    class Transitions(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = SpecModel(
                target.spec,
                target.device_spec,
                torch.is_autocast_enabled(d),
                torch.get_autocast_dtype(d),
                torch.is_autocast_cache_enabled(),
                cache_key(target),
            )
            self.inputs: dict[tuple[int, bool], Materialized] = {}
            self.log: list[str] = []
            self.chosen: list[int] = [0]

        def _input(self, index: int, grad: bool) -> Materialized:
            if (index, grad) not in self.inputs:
                sample = target.spec.ops[pool[index].op].samples[0]
                with target.tensors(), torch.inference_mode(False):  # never inference tensors
                    self.inputs[index, grad] = make_inputs(sample, (torch.float32,), d, requires_grad=grad)
            return self.inputs[index, grad]

        @precondition(lambda self: len(self.model.frames) < MAX_DEPTH)
        @rule(
            enabled=st.sampled_from([True, True, False]),
            dtype=st.one_of(st.none(), st.sampled_from(dtypes)),
            cache=st.sampled_from([None, True, False]),
        )
        def enter_region(self, enabled: bool, dtype: torch.dtype | None, cache: bool | None) -> None:
            kw: dict[str, Any] = {"enabled": enabled, "dtype": dtype}
            if cache is not None:
                kw["cache_enabled"] = cache
            ctx = target.autocast_impl(d, **kw)
            ctx.__enter__()
            self.model.enter_autocast(enabled, dtype, cache)
            self.model.frames[-1].ctx = ctx
            self.log.append(f"enter torch.autocast({d!r}, {', '.join(f'{k}={v}' for k, v in kw.items())})")

        @precondition(lambda self: len(self.model.frames) < MAX_DEPTH)
        @rule(mode=st.sampled_from(sorted(GRAD_MODES)))
        def enter_grad_mode(self, mode: str) -> None:
            ctx = GRAD_MODES[mode]()
            ctx.__enter__()
            self.model.enter_grad("inference" if mode == "inference" else mode)
            self.model.frames[-1].ctx = ctx
            self.log.append(f"enter torch.{GRAD_MODES[mode].__name__}()")

        @precondition(lambda self: bool(self.model.frames))
        @rule()
        def exit(self) -> None:
            frame: Frame = self.model.exit()
            frame.ctx.__exit__(None, None, None)
            self.log.append("exit the innermost context")

        @precondition(lambda self: self.model.nesting > 0)
        @rule(dtype=st.sampled_from(dtypes))
        def set_dtype(self, dtype: torch.dtype) -> None:
            torch.set_autocast_dtype(d, dtype)
            self.model.dtype = dtype
            self.log.append(f"torch.set_autocast_dtype({d!r}, {dtype})")

        @precondition(lambda self: self.model.nesting > 0)
        @rule(enabled=st.booleans())
        def set_enabled(self, enabled: bool) -> None:
            torch.set_autocast_enabled(d, enabled)
            self.model.enabled = enabled
            self.log.append(f"torch.set_autocast_enabled({d!r}, {enabled})")

        @precondition(lambda self: self.model.nesting > 0)
        @rule(flag=st.booleans())
        def set_cache_flag(self, flag: bool) -> None:
            torch.set_autocast_cache_enabled(flag)
            self.model.cache_flag = flag
            self.log.append(f"torch.set_autocast_cache_enabled({flag})")

        @initialize(ops=st.lists(st.integers(0, max(len(pool) - 1, 0)), min_size=1, max_size=2, unique=True))
        def choose_ops(self, ops: list[int]) -> None:
            """Each example calls one or two ops (so that calls meet each other's casts)."""
            self.chosen = ops

        @rule(pick=st.integers(0, 1))
        def call_with_weights(self, pick: int) -> None:
            """The most frequent call: weights (float32 leaves that require grad), cached by the rules."""
            self.call(pick, True)

        @rule(pick=st.integers(0, 1), grad=st.booleans())
        def call(self, pick: int, grad: bool) -> None:
            index = self.chosen[pick % len(self.chosen)]
            case = pool[index]
            m = self._input(index, grad)
            expected = self.model.expect(case.op, m)
            with target.tensors():
                arrived = flat_tensors(
                    Sentinel(target, case.op, m).arrived(torch.is_inference_mode_enabled())
                )
            observed = self.model.observe(expected, arrived)
            what = "float32 leaves that require grad" if grad else "float32 tensors without grad"
            self.log.append(f"call {case.op} with {what}")
            shown = Case("transitions", d, dtype_name(self.model.dtype), case.policy, case.op, kind="state")
            assert_scenario(
                shown,
                "a call after these state changes received other tensors than the spec's model says",
                [e.what for e in expected],
                observed,
                m,
                self.log,
                "rules.cache (what is cached, key, cleared_at, in_inference_mode) and rules.context",
            )

        @invariant()
        def state_matches(self) -> None:
            real = (
                torch.is_autocast_enabled(d),
                torch.get_autocast_dtype(d),
                torch.is_autocast_cache_enabled(),
            )
            want = (self.model.enabled, self.model.dtype, self.model.cache_flag)
            assert real == want, f"autocast state {real}, the model says {want} after: {'; '.join(self.log)}"

        def teardown(self) -> None:
            while self.model.frames:
                with contextlib.suppress(Exception):
                    self.model.exit().ctx.__exit__(None, None, None)

    return Transitions


def test_state_transitions(target: Target, lower: torch.dtype, request: pytest.FixtureRequest) -> None:
    require_autocast(target, lower)
    ctx = target.spec.rules.context
    if not (ctx.nesting_restores_state and ctx.exception_restores_state):
        pytest.skip(
            "the model needs rules.context.nesting_restores_state: the spec claims no state after an exit"
        )
    if not transition_pool(target, dtype_name(lower)):
        pytest.fail(f"the {target.device} spec has no op of rules.cache.policies with samples", pytrace=False)
    run_state_machine_as_test(
        make_machine(target, dtype_name(lower)), settings=suite_settings(request.config)
    )

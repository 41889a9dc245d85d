"""transitions: state changes between calls in one region, against the spec's model.

A Hypothesis state machine (per dtype under test; its examples are drawn, so certification
derandomizes them) over sequences of calls and changes of state: grad mode
(``no_grad``, ``enable_grad``, ``inference_mode``), the cache flag, nested regions with
another dtype, ``enabled=False`` and back, ``torch.set_autocast_dtype``. The ops are the
cache category's (its ``weights`` cases).

Procedure: each call is intercepted below Autocast (:class:`~conformance.kit.intercept.Sentinel`).
Expectation: :class:`SpecModel` tracks the thread's state (enabled, dtype, cache flag,
nesting), the grad mode and the weight-cast cache as ``rules.cache`` and ``rules.context``
describe them, and predicts per tensor of the next call the dtype it arrives in and
whether it is the cached cast, a fresh cast or the input itself. The cast plan comes from
the reference policy engine, never from the autocast under test.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from autocast_spec.model import DeviceSpec, Spec
from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.engine.policy import AutocastState, decide
from reference_impl.harness.samples import Materialized

from ..kit.case import Case
from ..kit.category import Category
from ..kit.inputs import flat_tensors, make_inputs
from ..kit.intercept import Sentinel
from ..kit.refusal import require_autocast
from ..kit.verdict import Observation, expect, not_applicable
from ..target import Target
from .cache import GROWTH, OTHER_DTYPE, transition_pool

ARRIVALS = "transitions.arrivals"
STATE = "transitions.state"
CATEGORY = Category(
    "transitions",
    __doc__,
    checks=(ARRIVALS, STATE),
    mandatory_able=False,  # a Hypothesis state machine: its examples are drawn
)
RULE = "rules.cache (what is cached, key, cleared_at, in_inference_mode) and rules.context"


def cache_key(target: Target) -> str:
    """The cache key native autocast uses on this release: ``rules.cache.key``, or ``source``
    where a known bug of check ``cache.other_dtype`` is declared (the reference follows the rule)."""
    rules = target.spec.rules
    declared = any(
        b.check == OTHER_DTYPE and (not b.devices or target.device in b.devices) for b in rules.known_bugs
    )
    return "source" if declared and not target.uses_reference else rules.cache.key


def caches_in_inference(target: Target) -> bool:
    """Whether native autocast caches casts under inference_mode on this release:
    ``rules.cache.in_inference_mode``, or True where a known bug of check ``cache.growth``
    is declared (the reference follows the rule)."""
    rules = target.spec.rules
    declared = any(
        b.check == GROWTH and (not b.devices or target.device in b.devices) for b in rules.known_bugs
    )
    return True if declared and not target.uses_reference else rules.cache.in_inference_mode


@dataclass
class Frame:
    """One entered context: an autocast region or a grad mode, with the state it found."""

    kind: str  # "autocast" | "grad"
    saved: tuple[Any, ...]
    ctx: Any = None


@dataclass
class SpecModel:
    spec: Spec
    device_spec: DeviceSpec
    enabled: bool
    dtype: torch.dtype
    cache_flag: bool
    cache_key: str  # rules.cache.key, or what the release does (known_bugs.cache_key)
    in_inference_mode: bool  # rules.cache.in_inference_mode, or what the release does
    grad: str = "grad"  # "grad" | "no_grad" | "inference"
    nesting: int = 0
    frames: list[Frame] = field(default_factory=list)
    # source tensor id (and dtype under key source_and_dtype) -> the cast observed for it
    cache: dict[Any, torch.Tensor] = field(default_factory=dict)
    # every cast any call received (kept alive, so that identity means reuse)
    seen: list[torch.Tensor] = field(default_factory=list)

    @property
    def rules(self) -> Any:
        return self.spec.rules

    def enter_autocast(self, enabled: bool, dtype: torch.dtype | None, cache_enabled: bool | None) -> None:
        self.frames.append(Frame("autocast", (self.enabled, self.dtype, self.cache_flag)))
        self.enabled = enabled
        self.dtype = dtype if dtype is not None else self.dtype
        self.cache_flag = cache_enabled if cache_enabled is not None else self.cache_flag
        self.nesting += 1

    def enter_grad(self, mode: str) -> None:
        self.frames.append(Frame("grad", (self.grad, self.enabled, mode)))
        if mode == "inference":
            self.grad = "inference"
        elif self.grad != "inference":  # no_grad / enable_grad inside inference_mode stay inference
            self.grad = mode

    def exit(self) -> Frame:
        frame = self.frames.pop()
        if frame.kind == "grad":
            if frame.saved[2] == "inference" and self.rules.context.inference_mode_exit_restores_enabled:
                self.enabled = frame.saved[1]
            self.grad = frame.saved[0]
            return frame
        if self.rules.context.nesting_restores_state:
            self.enabled, self.dtype, self.cache_flag = frame.saved
        self.nesting -= 1
        if self.rules.cache.cleared_at == "every_exit" or self.nesting == 0:
            self.cache.clear()
        return frame

    def _key(self, src: torch.Tensor, dtype: torch.dtype) -> Any:
        return (id(src), dtype) if self.cache_key == "source_and_dtype" else id(src)

    def _caching(self) -> bool:
        return self.cache_flag and (self.grad != "inference" or self.in_inference_mode)

    def expect(self, op: str, m: Materialized) -> list[Expected]:
        """Per tensor of the call, in order: what it should arrive as."""
        if not self.enabled:
            return [Expected(t, f"{dtype_name(t.dtype)} uncast") for _, t in m.tensor_paths()]
        state = AutocastState(self.device_spec.device, self.dtype, True)
        plan = decide(self.device_spec, self.rules, state, op, m.args, m.kwargs, self.spec.op_info(op))
        casts = {c.path: c for c in plan.casts}
        out = []
        for path, t in m.tensor_paths():
            c = casts.get(path)
            if c is None:
                out.append(Expected(t, f"{dtype_name(t.dtype)} uncast"))
                continue
            key = self._key(t, c.to_dtype) if c.weight and self._caching() else None
            hit = self.cache.get(key) if key is not None else None
            if hit is not None:
                out.append(Expected(t, f"{dtype_name(hit.dtype)} cached"))
            else:
                out.append(Expected(t, f"{dtype_name(c.to_dtype)} fresh", key))
        return out

    def observe(self, expected: list[Expected], arrived: list[torch.Tensor]) -> list[str]:
        """What arrived, in the model's terms; the casts the rules cache are remembered. Tensors
        beyond the call's own (a kernel that passes one more, as cuDNN's RNN passes its flat
        weight buffer) are ``<dtype> extra``; tensors that never arrived, ``missing``."""
        out = []
        for e, got in zip(expected, arrived, strict=False):
            if got is e.source:
                out.append(f"{dtype_name(got.dtype)} uncast")
                continue
            cached = any(v is got for v in self.seen)  # a cast received before: reused
            out.append(f"{dtype_name(got.dtype)} {'cached' if cached else 'fresh'}")
            if not cached:
                self.seen.append(got)
            if e.cache_key is not None and not cached:
                self.cache[e.cache_key] = got
        out += [f"{dtype_name(t.dtype)} extra" for t in arrived[len(expected) :]]
        return out + ["missing"] * (len(expected) - len(arrived))


@dataclass
class Expected:
    source: torch.Tensor
    what: str  # "<dtype> uncast" | "<dtype> fresh" | "<dtype> cached"
    cache_key: Any = None  # set when the rules cache this (fresh) cast


MAX_DEPTH = 6
GRAD_MODES = {"no_grad": torch.no_grad, "enable_grad": torch.enable_grad, "inference": torch.inference_mode}


def make_machine(target: Target, lower: torch.dtype) -> type[RuleBasedStateMachine]:
    d = target.device
    pool = transition_pool(target, lower)
    dtypes = [dtype_of(x) for x in target.device_spec.lower_dtypes]

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
                caches_in_inference(target),
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
            # inference tensors (made under inference_mode, used after it) skip Autograd too
            below = torch.is_inference_mode_enabled() or any(t.is_inference() for t in m.tensors())
            shown: Case[None] = Case("transitions", d, self.model.dtype, case.policy, case.op, case.op)
            with target.tensors():
                arrived = flat_tensors(Sentinel(target, case.op, m, shown, ARRIVALS).arrived(below))
            observed = self.model.observe(expected, arrived)
            what = "float32 leaves that require grad" if grad else "float32 tensors without grad"
            self.log.append(f"call {case.op} with {what}")
            expect(
                target,
                Observation(
                    shown,
                    ARRIVALS,
                    "a call after these state changes received other tensors than the spec's model says",
                    [e.what for e in expected],
                    observed,
                    m,
                    facts={"rule": RULE},
                    steps=tuple(self.log),
                ),
            )

        @invariant()
        def state_matches(self) -> None:
            real = (
                torch.is_autocast_enabled(d),
                torch.get_autocast_dtype(d),
                torch.is_autocast_cache_enabled(),
            )
            want = (self.model.enabled, self.model.dtype, self.model.cache_flag)
            shown: Case[None] = Case("transitions", d, self.model.dtype)
            expect(
                target,
                Observation(shown, STATE, "the state after these changes", want, real, steps=tuple(self.log)),
            )

        def teardown(self) -> None:
            while self.model.frames:
                with contextlib.suppress(Exception):
                    self.model.exit().ctx.__exit__(None, None, None)

    return Transitions


def machine(target: Target, lower: torch.dtype) -> type[RuleBasedStateMachine]:
    """The state machine for ``lower``, where the spec's model applies here."""
    require_autocast(target, lower)
    ctx = target.spec.rules.context
    if not (ctx.nesting_restores_state and ctx.exception_restores_state):
        not_applicable(
            "the model needs rules.context.nesting_restores_state: the spec claims no state after an exit"
        )
    if not transition_pool(target, lower) and target.selected_ops:
        not_applicable("--op selects no op the state machine can call")
    if not transition_pool(target, lower):
        shown: Case[None] = Case("transitions", target.device, lower)
        expect(
            target,
            Observation(
                shown, ARRIVALS, "no op to call", "an op of rules.cache.policies with samples", "none"
            ),
        )
    return make_machine(target, lower)

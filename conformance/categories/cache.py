"""cache: the weight-cast cache (``rules.cache``), for every op of the cached policies.

A cast is cached when two calls in one region receive the *same* cast tensor object below
Autocast; uncached casts are fresh objects each call.

Cases, per dtype under test, for every op of ``rules.cache.policies`` with samples, its
first sample in each :class:`Scenario` (``other_dtype`` only on devices with two lower
dtypes). Also (``test_no_growth_over_iterations``) 50 calls in one region under
``no_grad`` and under ``inference_mode`` keep at most one cast per weight alive.

Procedure: the sentinel-style interception of the op's arguments below Autocast (nothing
runs), twice per scenario.
Expectation, per tensor, from the reference policy engine's plan (which casts, and which
casts are weights by ``rules.cache``) and from ``rules.cache`` itself: weights are reused
while the cache is on (``cache_enabled``), kept across an inner exit and gone after the
outermost (``cleared_at``); a nested region with the other lower dtype gets a fresh cast to
its own dtype under ``key: source_and_dtype``, the outer cast under ``key: source``.
"""

from __future__ import annotations

import enum
import gc
import weakref
from typing import Any

import torch

from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.harness.samples import Materialized

from ..kit.calls import decide
from ..kit.case import Case, device_needed, listed_ops
from ..kit.category import Category
from ..kit.inputs import flat_tensors, make_inputs, map_floats
from ..kit.intercept import Sentinel, make_sentinel
from ..kit.refusal import require_autocast
from ..kit.verdict import Observation, not_applicable
from ..target import Target

SCENARIO = "cache.scenario"
WHAT = "the weight-cast cache differs from the spec"
OTHER_DTYPE = "cache.other_dtype"
GROWTH = "cache.growth"


class Scenario(enum.Enum):
    WEIGHTS = "weights"  # float32 leaves that require grad: cached
    NO_GRAD_INPUTS = "no_grad_inputs"  # float32 leaves without requires_grad (requires_grad_only)
    NON_LEAF = "non_leaf"  # float32 non-leaf tensors that require grad (leaf_only)
    VIEW = "view"  # a detached view that requires grad: a leaf, but a view (exclude_views)
    NESTED_EXIT = "nested_exit"  # kept across an inner exit, gone after the outermost (cleared_at)
    CACHE_DISABLED = "cache_disabled"  # autocast(cache_enabled=False): nothing cached
    OTHER_DTYPE = "other_dtype"  # a nested region with the device's other lower dtype (key)


GIVEN = {
    Scenario.WEIGHTS: "float32 leaves that require grad",
    Scenario.NO_GRAD_INPUTS: "float32 leaves that do not require grad",
    Scenario.NON_LEAF: "float32 non-leaf tensors (x * 1 of leaves that require grad)",
    Scenario.VIEW: "float32 views that are leaves and require grad (x.detach().as_strided(...))",
    Scenario.NESTED_EXIT: "float32 leaves that require grad",
    Scenario.CACHE_DISABLED: "float32 leaves that require grad",
    Scenario.OTHER_DTYPE: "float32 leaves that require grad",
}


def cases(target: Target) -> list[Case[Scenario]]:
    cached = target.spec.rules.cache.policies
    two_dtypes = len(target.device_spec.lower_dtypes) >= 2
    # per dtype, the ops of each cached policy in the rule's order, by name
    by_policy = sorted(
        listed_ops(target, cached), key=lambda lo: (target.dtypes.index(lo.dtype), cached.index(lo.policy))
    )
    ds = target.device_spec

    def cached_under_both(op: str, dtype: torch.dtype) -> bool:
        """The op is cached under the other lower dtype too (not so where its policy follows
        the dtype, ``by_dtype``: IPEX's _addmm_activation is fp32 under float16)."""
        others = [d for d in ds.lower_dtypes if d != dtype_name(dtype)]
        return two_dtypes and all(ds.ops[op].policy_under(d) in cached for d in others)

    return [
        Case("cache", target.device, lo.dtype, lo.policy, lo.op, lo.op, params=s)
        for lo in by_policy
        for s in Scenario
        if s is not Scenario.OTHER_DTYPE or cached_under_both(lo.op, lo.dtype)
    ]


CATEGORY = Category(
    "cache",
    __doc__,
    checks=(SCENARIO, OTHER_DTYPE, GROWTH),
    generators=(cases,),
    owed=lambda rules: rules.cache.policies,
)


def transition_pool(target: Target, dtype: torch.dtype) -> list[Case[Scenario]]:
    """The ops the state-transition machine draws from: this category's weight cases."""
    return [
        c
        for c in cases(target)
        if c.dtype == dtype and c.params is Scenario.WEIGHTS and not device_needed(target, c.op)
    ]


def scenario_of(case: Case[Scenario]) -> Scenario:
    assert case.params is not None
    return case.params


def lower_of(case: Case[Scenario]) -> torch.dtype:
    assert case.dtype is not None
    return case.dtype


def _detached_view(t: torch.Tensor) -> torch.Tensor:
    """A leaf that requires grad and is a view (of a detached copy of ``t``)."""
    return t.detach().as_strided(t.size(), t.stride(), t.storage_offset()).requires_grad_()


def _inputs(target: Target, case: Case) -> Materialized:
    with target.tensors():
        m = make_inputs(
            target.spec.ops[case.op].samples[0],
            (torch.float32,),
            target.device,
            requires_grad=case.params is not Scenario.NO_GRAD_INPUTS,
        )
        if case.params is Scenario.NON_LEAF:
            m = map_floats(m, lambda t: t * 1)
        elif case.params is Scenario.VIEW:
            m = map_floats(m, _detached_view)
    return m


def _cached_slots(target: Target, case: Case, m: Materialized) -> tuple[list[bool], list[bool]]:
    """Per tensor, in arrival order: (cast by the plan, a weight-cache candidate)."""
    plan = decide(target, lower_of(case), case.op, m).plan
    assert plan is not None
    casts = {c.path: c for c in plan.casts}
    found = [casts.get(path) for path, _ in m.tensor_paths()]
    return [c is not None for c in found], [bool(c is not None and c.weight) for c in found]


def _same(a: list[Any], b: list[Any]) -> list[bool]:
    return [x is y for x, y in zip(a, b, strict=True)]


def scenario(target: Target, case: Case) -> Observation:
    """Two calls of the op in the case's scenario; which casts were reused."""
    lower = lower_of(case)
    require_autocast(target, lower)
    if case.params is Scenario.OTHER_DTYPE:
        return _other_dtype(target, case)
    rules = target.spec.rules.cache
    m = _inputs(target, case)
    p = Sentinel(target, case.op, m, case, SCENARIO)
    cast, weight = _cached_slots(target, case, m)
    region = lambda **kw: target.autocast_impl(target.device, dtype=lower, **kw)  # noqa: E731
    if case.params is Scenario.NESTED_EXIT:
        return _nested_exit(target, case, m, p, cast, weight)
    with target.tensors():
        enabled = case.params is not Scenario.CACHE_DISABLED
        with region(cache_enabled=enabled):
            a = flat_tensors(p.arrived())
            b = flat_tensors(p.arrived())
    expected = [not c or (w and enabled) for c, w in zip(cast, weight, strict=True)]
    steps = (
        f"with autocast(cache_enabled={enabled}): call twice with {GIVEN[scenario_of(case)]}",
        "expected/observed: per input, did both calls receive the same cast tensor below Autocast",
    )
    facts = {
        "rule": f"rules.cache: source_dtypes {list(rules.source_dtypes)}, leaf_only {rules.leaf_only}, "
        f"requires_grad_only {rules.requires_grad_only}, exclude_views {rules.exclude_views}"
    }
    return Observation(case, SCENARIO, WHAT, expected, _same(a, b), m, facts=facts, steps=steps)


def _nested_exit(
    target: Target, case: Case, m: Materialized, p: Sentinel, cast: list[bool], weight: list[bool]
) -> Observation:
    """A cast kept across an inner exit, gone after the outermost one (``cleared_at``)."""
    rules = target.spec.rules.cache
    region = lambda: target.autocast_impl(target.device, dtype=lower_of(case))  # noqa: E731
    with target.tensors():
        with region():
            with region():
                first = flat_tensors(p.arrived())
            after_inner = flat_tensors(p.arrived())
        with region():
            after_outer = flat_tensors(p.arrived())
    kept = rules.cleared_at == "outermost_exit"
    expected = [not c or (w and kept) for c, w in zip(cast, weight, strict=True)]
    expected += [not c for c in cast]
    steps = (
        "outer region: inner region: call (a); inner exit; call (b); outer exit",
        "new region: call (c)",
        "expected/observed: per input, a is b; then per input, a is c",
    )
    facts = {"rule": f"rules.cache.cleared_at: {rules.cleared_at}"}
    observed = _same(first, after_inner) + _same(first, after_outer)
    return Observation(case, SCENARIO, WHAT, expected, observed, m, facts=facts, steps=steps)


def _other_dtype(target: Target, case: Case) -> Observation:
    """A weight cast in a region, then the same call in a nested region with the device's
    other lower dtype: under rules.cache.key source_and_dtype the nested call gets a fresh
    cast to its own dtype; under source it gets the outer region's cast again."""
    lower = lower_of(case)
    other = dtype_of(next(d for d in target.device_spec.lower_dtypes if d != case.dtype_text))
    key = target.spec.rules.cache.key
    m = _inputs(target, case)
    p = Sentinel(target, case.op, m, case, OTHER_DTYPE)
    _, weight = _cached_slots(target, case, m)
    with target.tensors(), target.autocast_impl(target.device, dtype=lower):
        a = flat_tensors(p.arrived())
        with target.autocast_impl(target.device, dtype=other):
            b = flat_tensors(p.arrived())
    slots = [i for i, w in enumerate(weight) if w]
    want = f"{dtype_name(other)} fresh" if key == "source_and_dtype" else f"{dtype_name(lower)} reused"
    got = sorted({f"{dtype_name(b[i].dtype)} {'reused' if b[i] is a[i] else 'fresh'}" for i in slots})
    steps = (
        f"with autocast(dtype={dtype_name(lower)}): call (a) with float32 leaves that require grad",
        f"  with autocast(dtype={dtype_name(other)}): call (b)",
        "expected/observed: per weight, the dtype b receives and whether it is a's cast",
    )
    return Observation(
        case,
        OTHER_DTYPE,
        "a nested region with another dtype",
        want if slots else "",
        ", ".join(got),
        m,
        facts={"rule": f"rules.cache.key: {key}"},
        steps=steps,
    )


def cached_per_weight(target: Target) -> bool:
    """Whether the rules cache a lower cast of a float32 weight on this device at all."""
    c = target.spec.rules.cache
    lower_cached = "float32" in c.source_dtypes and any(p.value == "lower_precision_fp" for p in c.policies)
    return lower_cached and target.device_spec.cast_cache  # a device may cache nothing (cast_cache)


def growth(target: Target, lower: torch.dtype, grad_mode: str) -> Observation:
    """50 calls in one region: casts alive per weight (watched through weak references: a cast
    stays alive only while the cache holds it). Under no_grad the rules.cache rule applies
    (exactly one); under inference_mode, ``rules.cache.in_inference_mode`` says."""
    require_autocast(target, lower)
    if grad_mode == "inference_mode" and target.policy_only:
        not_applicable("inference_mode skips the Autograd key and FakeTensors never reach the backend key")
    p = make_sentinel(target, Case("cache", target.device, lower), GROWTH, requires_grad=True)
    slots = [
        i
        for i, t in enumerate(p.inputs.tensors())
        if t.dtype == torch.float32 and t.is_leaf and t.requires_grad
    ]
    refs: list[list[weakref.ref[torch.Tensor]]] = [[] for _ in slots]
    mode = torch.no_grad() if grad_mode == "no_grad" else torch.inference_mode()
    with target.tensors(), mode, target.autocast_impl(target.device, dtype=lower):
        for _ in range(50):
            arrived = flat_tensors(p.arrived(grad_mode == "inference_mode"))
            for k, i in enumerate(slots):
                refs[k].append(weakref.ref(arrived[i]))
            del arrived
        gc.collect()
        alive = [len({id(r()) for r in rs if r() is not None}) for rs in refs]
    cached = cached_per_weight(target) and (
        grad_mode == "no_grad" or target.spec.rules.cache.in_inference_mode
    )
    return Observation(
        p.case,
        GROWTH,
        f"casts alive per weight after 50 calls under {grad_mode}",
        [1 if cached else 0] * len(slots),
        alive,
        p.inputs,
        facts={"rule": f"rules.cache (in_inference_mode: {target.spec.rules.cache.in_inference_mode})"},
    )

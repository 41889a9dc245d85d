"""The weight-cast cache (rules.cache), for every op of the cached policies.

A cast is cached when two calls in one autocast region receive the *same* cast
tensor object below Autocast; uncached casts are fresh objects each call. Each op of
``rules.cache.policies`` is checked with its first sample: weights (float32 leaves
that require grad) are cached, tensors without grad, non-leaves and views are not,
the cache is cleared at ``rules.cache.cleared_at`` and off with ``cache_enabled=False``.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from conformance.assertions import assert_scenario
from conformance.cases import Case
from conformance.known_bugs import judge
from conformance.semantic_checks import cache_scenario, other_dtype_scenario
from conformance.sentinel import Sentinel, flat_tensors, make_sentinel, require_autocast
from conformance.target import Target
from reference_impl.dtypes import dtype_of

pytestmark = [pytest.mark.cache, pytest.mark.real_tensors]


@pytest.mark.conformance_cases("cache")
def test_cache(target: Target, case: Case) -> None:
    require_autocast(target, dtype_of(case.dtype))
    if case.kind == "other_dtype":
        o = other_dtype_scenario(target, case)
        judge(
            target,
            "cache.other_dtype",
            o.expected,
            o.observed,
            lambda why: assert_scenario(
                case, "a nested region with another dtype", o.expected, o.observed, o.inputs, o.steps, o.rule
            ),
        )
        return
    r = cache_scenario(target, case)
    assert_scenario(
        case, "the weight-cast cache differs from the spec", r.expected, r.observed, r.inputs, r.steps, r.rule
    )


def _weight_slots(p: Sentinel) -> list[int]:
    """Indexes (among the arrived tensors) of float32 leaf inputs that require grad."""
    return [
        i
        for i, t in enumerate(p.inputs.tensors())
        if t.dtype == torch.float32 and t.is_leaf and t.requires_grad
    ]


def _expect_cached(target: Target) -> bool:
    c = target.spec.rules.cache
    lower_cached = "float32" in c.source_dtypes and any(p.value == "lower_precision_fp" for p in c.policies)
    return lower_cached and target.device_spec.cast_cache  # a device may cache nothing (cast_cache)


@pytest.mark.usefixtures("native_autocast")
@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode"])
def test_no_growth_over_iterations(target: Target, lower: torch.dtype, grad_mode: str) -> None:
    """Many iterations in one region keep at most one cast per weight alive (the cache does not grow).

    Casts are watched through weak references: a cast stays alive only while the
    cache holds it. Under no_grad the rules.cache rule applies (exactly one);
    under inference_mode, rules.cache.in_inference_mode says whether casts are cached.
    """
    if grad_mode == "inference_mode" and target.policy_only:
        pytest.skip("inference_mode skips the Autograd key and FakeTensors never reach the backend key")
    p = make_sentinel(target, requires_grad=True)
    slots = _weight_slots(p)
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
    assert all(n <= 1 for n in alive), f"{p.op}: casts alive per weight after 50 iterations: {alive}"
    cached = _expect_cached(target) and (grad_mode == "no_grad" or target.spec.rules.cache.in_inference_mode)
    want = 1 if cached else 0
    assert all(n == want for n in alive), (
        f"{p.op}: casts alive per weight under {grad_mode} {alive}, rules.cache says {want} "
        f"(in_inference_mode: {target.spec.rules.cache.in_inference_mode})"
    )

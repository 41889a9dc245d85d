"""The weight-cast cache (rules.cache): what is cached, when it is cleared, that it does not grow.

A cast is cached when two calls in one autocast region receive the *same* cast
tensor object below Autocast; uncached casts are fresh objects each call.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch

from conformance.context_probe import Probe, make_probe
from conformance.target import Target

pytestmark = [pytest.mark.cache, pytest.mark.real_tensors, pytest.mark.usefixtures("native_autocast")]


def _weight_slots(p: Probe) -> list[int]:
    """Indexes (among the arrived tensors) of float32 leaf inputs that require grad."""
    return [
        i
        for i, t in enumerate(p.inputs.tensors())
        if t.dtype == torch.float32 and t.is_leaf and t.requires_grad
    ]


def _tensors(values: list[Any]) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


def _same_cast(p: Probe, between: Callable[[], None] | None = None) -> list[bool]:
    """Per input tensor: did two calls receive the identical cast object?"""
    a = _tensors(p.arrived())
    if between:
        between()
    b = _tensors(p.arrived())
    return [x is y for x, y in zip(a, b, strict=True)]


def _expect_cached(target: Target, lower: torch.dtype) -> bool:
    c = target.spec.rules.cache
    return "float32" in c.source_dtypes and any(p.value == "lower_precision_fp" for p in c.policies)


def test_weights_cached_within_region(target: Target, lower: torch.dtype) -> None:
    p = make_probe(target, requires_grad=True)
    with target.tensors(), target.autocast_impl(target.device, dtype=lower):
        same = _same_cast(p)
    want = _expect_cached(target, lower)
    assert all(s == want for s in same), f"{p.op}: cached per input {same}, rules.cache says {want}"


def test_non_grad_tensors_not_cached(target: Target, lower: torch.dtype) -> None:
    p = make_probe(target, requires_grad=False)
    with target.tensors(), target.autocast_impl(target.device, dtype=lower):
        same = _same_cast(p)
    want = not target.spec.rules.cache.requires_grad_only and _expect_cached(target, lower)
    assert all(s == want for s in same), f"{p.op}: tensors without requires_grad cached: {same}"


def test_non_leaf_not_cached(target: Target, lower: torch.dtype) -> None:
    p = make_probe(target, requires_grad=True)
    with target.tensors():
        p.inputs = type(p.inputs)(
            tuple(a * 1 if isinstance(a, torch.Tensor) else a for a in p.inputs.args), p.inputs.kwargs
        )
        with target.autocast_impl(target.device, dtype=lower):
            same = _same_cast(p)
    want = not target.spec.rules.cache.leaf_only and _expect_cached(target, lower)
    assert all(s == want for s in same), f"{p.op}: non-leaf tensors cached: {same}"


def test_cache_disabled(target: Target, lower: torch.dtype) -> None:
    p = make_probe(target, requires_grad=True)
    with target.tensors(), target.autocast_impl(target.device, dtype=lower, cache_enabled=False):
        same = _same_cast(p)
    assert not any(same), f"{p.op}: cast cached with cache_enabled=False: {same}"


def test_cleared_at_outermost_exit(target: Target, lower: torch.dtype) -> None:
    p = make_probe(target, requires_grad=True)
    d = target.device
    with target.tensors():
        with target.autocast_impl(d, dtype=lower):
            with target.autocast_impl(d, dtype=lower):
                first = _tensors(p.arrived())
            after_inner = _tensors(p.arrived())
        with target.autocast_impl(d, dtype=lower):
            after_outer = _tensors(p.arrived())
    kept = [a is b for a, b in zip(first, after_inner, strict=True)]
    cleared = [a is not b for a, b in zip(first, after_outer, strict=True)]
    if _expect_cached(target, lower):
        assert all(kept), f"{p.op}: cache cleared at an inner exit: {kept}"
    assert all(cleared), f"{p.op}: cache survived the outermost exit: {cleared}"


@pytest.mark.parametrize("grad_mode", ["no_grad", "inference_mode"])
def test_no_growth_over_iterations(target: Target, lower: torch.dtype, grad_mode: str) -> None:
    """Many iterations in one region keep at most one cast per weight alive (the cache does not grow).

    Casts are watched through weak references: a cast stays alive only while the
    cache holds it. Under no_grad the rules.cache rule applies (exactly one);
    the spec does not say whether inference_mode caches, only that nothing grows.
    """
    if grad_mode == "inference_mode" and target.policy_only:
        pytest.skip("inference_mode skips the Autograd key and FakeTensors never reach the backend key")
    p = make_probe(target, requires_grad=True)
    slots = _weight_slots(p)
    refs: list[list[weakref.ref[torch.Tensor]]] = [[] for _ in slots]
    mode = torch.no_grad() if grad_mode == "no_grad" else torch.inference_mode()
    with target.tensors(), mode, target.autocast_impl(target.device, dtype=lower):
        for _ in range(50):
            arrived = _tensors(p.arrived(grad_mode == "inference_mode"))
            for k, i in enumerate(slots):
                refs[k].append(weakref.ref(arrived[i]))
            del arrived
        gc.collect()
        alive = [len({id(r()) for r in rs if r() is not None}) for rs in refs]
    assert all(n <= 1 for n in alive), f"{p.op}: casts alive per weight after 50 iterations: {alive}"
    if grad_mode == "no_grad" and _expect_cached(target, lower):
        assert all(n == 1 for n in alive), f"{p.op}: weights not cached under no_grad: {alive}"

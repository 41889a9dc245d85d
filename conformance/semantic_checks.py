"""The procedures behind the cache and thread tests: run a scenario, and say what the
spec's rules expect of it.

Cache: a cast is cached when two calls receive the *same* cast tensor object below
Autocast. What the rules expect per input comes from the reference policy engine's
cast plan (:func:`reference_impl.policy.decide`, which reads ``rules.cache``: the
``weight`` flag) and from ``rules.cache`` itself (flag, clearing).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from reference_impl.dtypes import dtype_name, dtype_of
from reference_impl.runtime import autocast_nesting, quiet
from reference_impl.samples import Materialized

from .cases import Case
from .runner import make_inputs, plan_for
from .sentinel import Sentinel, flat_tensors
from .target import Target


@dataclass
class CacheScenario:
    inputs: Materialized
    steps: tuple[str, ...]
    rule: str
    expected: list[bool]  # per tensor reaching the kernel: the same object at both calls
    observed: list[bool]


def _map_floats(m: Materialized, fn: Callable[[torch.Tensor], torch.Tensor]) -> Materialized:
    def walk(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return fn(v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return Materialized(tuple(walk(a) for a in m.args), {k: walk(v) for k, v in m.kwargs.items()})


def _detached_view(t: torch.Tensor) -> torch.Tensor:
    """A leaf that requires grad and is a view (of a detached copy of ``t``)."""
    return t.detach().as_strided(t.size(), t.stride(), t.storage_offset()).requires_grad_()


def cache_inputs(target: Target, case: Case) -> Materialized:
    sample = target.spec.ops[case.op].samples[0]
    with target.tensors():
        m = make_inputs(sample, (torch.float32,), target.device, requires_grad=case.kind != "no_grad_inputs")
        if case.kind == "non_leaf":
            m = _map_floats(m, lambda t: t * 1)
        elif case.kind == "view":
            m = _map_floats(m, _detached_view)
    return m


def cached_slots(target: Target, case: Case, m: Materialized) -> tuple[list[bool], list[bool]]:
    """Per tensor, in arrival order: (cast by the plan, a weight-cache candidate)."""
    plan = plan_for(target, dtype_of(case.dtype), case.op, m)
    casts = {c.path: c for c in plan.casts}
    found = [casts.get(path) for path, _ in m.tensor_paths()]
    return [c is not None for c in found], [bool(c is not None and c.weight) for c in found]


def _same(a: list[Any], b: list[Any]) -> list[bool]:
    return [x is y for x, y in zip(a, b, strict=True)]


def cache_scenario(target: Target, case: Case) -> CacheScenario:
    """Two calls of the op in the scenario ``case.kind``; which casts were reused."""
    lower = dtype_of(case.dtype)
    rules = target.spec.rules.cache
    m = cache_inputs(target, case)
    p = Sentinel(target, case.op, m)
    cast, weight = cached_slots(target, case, m)
    region = lambda **kw: target.autocast_impl(target.device, dtype=lower, **kw)  # noqa: E731
    desc = {
        "weights": "float32 leaves that require grad",
        "no_grad_inputs": "float32 leaves that do not require grad",
        "non_leaf": "float32 non-leaf tensors (x * 1 of leaves that require grad)",
        "view": "float32 views that are leaves and require grad (x.detach().as_strided(...))",
        "nested_exit": "float32 leaves that require grad",
        "cache_disabled": "float32 leaves that require grad",
    }[case.kind]
    with target.tensors():
        if case.kind == "nested_exit":
            with region():
                with region():
                    first = flat_tensors(p.arrived())
                after_inner = flat_tensors(p.arrived())
            with region():
                after_outer = flat_tensors(p.arrived())
            kept = rules.cleared_at == "outermost_exit"
            expected = [not c or (w and kept) for c, w in zip(cast, weight, strict=True)]
            expected += [not c for c in cast]
            observed = _same(first, after_inner) + _same(first, after_outer)
            steps: tuple[str, ...] = (
                "outer region: inner region: call (a); inner exit; call (b); outer exit",
                "new region: call (c)",
                "expected/observed: per input, a is b; then per input, a is c",
            )
            rule = f"rules.cache.cleared_at: {rules.cleared_at}"
            return CacheScenario(m, steps, rule, expected, observed)
        enabled = case.kind != "cache_disabled"
        with region(cache_enabled=enabled):
            a = flat_tensors(p.arrived())
            b = flat_tensors(p.arrived())
    expected = [not c or (w and enabled) for c, w in zip(cast, weight, strict=True)]
    steps = (
        f"with autocast(cache_enabled={enabled}): call twice with {desc}",
        "expected/observed: per input, did both calls receive the same cast tensor below Autocast",
    )
    rule = (
        f"rules.cache: source_dtypes {list(rules.source_dtypes)}, leaf_only {rules.leaf_only}, "
        f"requires_grad_only {rules.requires_grad_only}, exclude_views {rules.exclude_views}"
    )
    return CacheScenario(m, steps, rule, expected, _same(a, b))


@dataclass
class OtherDtypeScenario:
    inputs: Materialized
    steps: tuple[str, ...]
    rule: str
    expected: str  # what the weights of the nested call receive: "<dtype> fresh|reused", distinct
    observed: str


def _reuse(first: torch.Tensor, then: torch.Tensor) -> str:
    return f"{dtype_name(then.dtype)} {'reused' if then is first else 'fresh'}"


def other_dtype_scenario(target: Target, case: Case) -> OtherDtypeScenario:
    """A weight cast in a region, then the same call in a nested region with the device's
    other lower dtype: under rules.cache.key source_and_dtype the nested call gets a fresh
    cast to its own dtype; under source it gets the outer region's cast again."""
    lower = dtype_of(case.dtype)
    other = dtype_of(next(d for d in target.device_spec.supported_dtypes if d != case.dtype))
    key = target.spec.rules.cache.key
    m = cache_inputs(target, case)
    p = Sentinel(target, case.op, m)
    _, weight = cached_slots(target, case, m)
    with target.tensors(), target.autocast_impl(target.device, dtype=lower):
        a = flat_tensors(p.arrived())
        with target.autocast_impl(target.device, dtype=other):
            b = flat_tensors(p.arrived())
    slots = [i for i, w in enumerate(weight) if w]
    want = f"{dtype_name(other)} fresh" if key == "source_and_dtype" else f"{dtype_name(lower)} reused"
    steps = (
        f"with autocast(dtype={dtype_name(lower)}): call (a) with float32 leaves that require grad",
        f"  with autocast(dtype={dtype_name(other)}): call (b)",
        "expected/observed: per weight, the dtype b receives and whether it is a's cast",
    )
    return OtherDtypeScenario(
        m,
        steps,
        f"rules.cache.key: {key}",
        want if slots else "",
        ", ".join(
            sorted({f"{dtype_name(b[i].dtype)} {'reused' if b[i] is a[i] else 'fresh'}" for i in slots})
        ),
    )


# ---------------------------------------------------------------------------
# Thread-local state
# ---------------------------------------------------------------------------


def fields(device: str) -> dict[str, Any]:
    """The thread's autocast state, as rules.context names it."""
    return {
        "enabled": torch.is_autocast_enabled(device),
        "dtype": dtype_name(torch.get_autocast_dtype(device)),
        "cache_enabled": torch.is_autocast_cache_enabled(),
        "nesting": autocast_nesting(),
    }


def _in_thread(fn: Callable[[], Any]) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


@dataclass
class ThreadScenario:
    steps: tuple[str, ...]
    rule: str
    expected: Any
    observed: Any


def thread_scenario(target: Target, case: Case) -> ThreadScenario:
    """A new thread's view of one field (or the parent's, while a child sits in a region)."""
    d = target.device
    lower = dtype_of(case.dtype)
    ctx = target.spec.rules.context
    when, field = case.kind.split("-", 1)
    region = lambda: target.autocast_impl(d, dtype=lower, cache_enabled=False)  # noqa: E731
    what = f"torch.autocast({d!r}, dtype={lower}, cache_enabled=False), nested twice"
    outside = fields(d)  # the test starts outside any region (the suite checks that)
    # a fresh thread under thread_local: the defaults, enabled as the spec says
    fresh = {**outside, "enabled": ctx.new_thread_enabled, "dtype": target.device_spec.default_dtype}
    rule = f"rules.context.thread_local: {ctx.thread_local}, new_thread_enabled: {ctx.new_thread_enabled}"
    with quiet():
        if when == "child_region":
            entered, leave = threading.Event(), threading.Event()
            seen: dict[str, Any] = {}

            def child() -> None:
                with region(), region():
                    seen.update(fields(d))
                    entered.set()
                    leave.wait(10)

            t = threading.Thread(target=child)
            t.start()
            entered.wait(10)
            observed = fields(d)
            leave.set()
            t.join()
            steps = (f"a child thread enters {what}", "while it is inside, the parent reads its own state")
            return ThreadScenario(steps, rule, outside if ctx.thread_local else seen, observed)
        with region(), region():
            inside = fields(d)
            got = _in_thread(lambda: fields(d)) if when == "parent_inside" else None
        if when == "parent_after":
            got = _in_thread(lambda: fields(d))
    parent = inside if when == "parent_inside" else outside
    expected = fresh if ctx.thread_local else parent
    started = "inside the region" if when == "parent_inside" else "after it"
    steps = (f"the parent enters {what}", f"a new thread started {started} reads {field}")
    return ThreadScenario(steps, rule, expected[field], got[field] if got else None)

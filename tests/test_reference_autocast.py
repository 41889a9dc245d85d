"""reference_impl.autocast: native semantics (state, nesting, threads, cache), tracing, the spec driving it.

Ops are chosen from the spec by policy, never by name. Where its kernels sit in the dispatcher:
test_reference_dispatch.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from helpers.mixed_calls import mixed_calls
from helpers.reference_helpers import (
    CPU,
    LOWER,
    OFF,
    SPEC,
    out_dtype,
    reference_key_state,
    spec_without,
    torch_state,
)

import reference_impl
from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name
from reference_impl.engine.eligibility import weight_tensor
from reference_impl.engine.policy import ArgCast
from reference_impl.harness.compare import output_mismatch
from reference_impl.harness.samples import materialize, op_overload
from reference_impl.kernels import weight_cache
from reference_impl.kernels.reference_autocast import registered

# --- per op, through the dispatcher: the reference equals native for every sample ---

WHOLE = [
    pytest.param(op, i, dt, id=f"{op}-{i}-{dt}")
    for op in sorted(CPU.ops)
    for i in range(len(SPEC.ops[op].samples) if op in SPEC.ops else 0)
    for dt in CPU.supported_dtypes
]


@pytest.mark.parametrize("op,index,dtype", WHOLE)
def test_reference_region_equals_native(op: str, index: int, dtype: str) -> None:
    info = SPEC.ops[op]
    lower = getattr(torch, dtype)
    # Kernels the catalog marks nondeterministic do not repeat bitwise: compare within tolerance.
    tolerance = SPEC.tolerance(op, dtype_name(lower)) if info.nondeterministic else None
    results = []
    # The reference runs twice: the second call's plan comes from the kernel's plan memo.
    for region in (torch.autocast, reference_impl.autocast, reference_impl.autocast):
        m = materialize(info.samples[index], torch.float32, "cpu")
        torch.manual_seed(0)
        with warnings.catch_warnings(), region("cpu", dtype=lower):
            warnings.simplefilter("ignore")
            try:
                results.append((op_overload(op)(*m.args, **m.kwargs), None))
            except RuntimeError as e:
                results.append((None, str(e).splitlines()[0]))
    (native, native_err), *refs = results
    for call, (ref, ref_err) in enumerate(refs, 1):
        assert native_err == ref_err, (
            f"call {call}: native raised {native_err!r}, reference raised {ref_err!r}"
        )
        problem = output_mismatch(native, ref, tolerance, info.scratch_outputs)
        assert problem is None, (
            f"{op} under reference_impl.autocast('cpu', dtype={dtype}), call {call}: {problem}\n"
            f"reproduce: pytest tests/test_reference_autocast.py -k '{op}-{index}-{dtype}'"
        )


# --- state ---


def test_state_restored_after_exit() -> None:
    before = torch_state()
    with reference_impl.autocast("cpu", dtype=torch.float16, cache_enabled=False):
        assert torch_state() == (True, torch.float16, False)
        assert registered("cpu")
    assert torch_state() == before
    assert not registered("cpu")
    assert reference_key_state() == OFF
    assert out_dtype(LOWER) == torch.float32


def test_state_restored_after_exception() -> None:
    before = torch_state()
    with pytest.raises(ZeroDivisionError), reference_impl.autocast("cpu"):
        assert out_dtype(LOWER) == torch.bfloat16
        _ = 1 / 0
    assert torch_state() == before
    assert reference_key_state() == OFF
    with reference_impl.autocast("cpu"):  # and it still works afterwards
        assert out_dtype(LOWER) == torch.bfloat16


def test_nesting_and_disabled_subregion() -> None:
    with reference_impl.autocast("cpu"):
        assert out_dtype(LOWER) == torch.bfloat16
        with reference_impl.autocast("cpu", dtype=torch.float16):
            assert out_dtype(LOWER) == torch.float16
            with reference_impl.autocast("cpu", enabled=False):
                assert out_dtype(LOWER) == torch.float32
                assert out_dtype(LOWER, torch.float16) == torch.float16  # untouched when disabled
            assert out_dtype(LOWER) == torch.float16
        assert out_dtype(LOWER, torch.float16) == torch.bfloat16
        assert out_dtype(LOWER) == torch.bfloat16
        assert registered("cpu")
    assert not registered("cpu")


def test_dtype_none_inherits_the_current_dtype() -> None:
    with reference_impl.autocast("cpu", dtype=torch.float16), reference_impl.autocast("cpu"):
        assert out_dtype(LOWER) == torch.float16


def test_native_disable_inside_reference_region() -> None:
    with reference_impl.autocast("cpu"), torch.autocast("cpu", enabled=False):
        assert out_dtype(LOWER) == torch.float32


def test_decorator() -> None:
    @reference_impl.autocast("cpu", dtype=torch.float16)
    def f() -> torch.dtype:
        return out_dtype(LOWER)

    assert f() == torch.float16
    assert f() == torch.float16  # reusable
    assert torch_state()[0] is False


def test_new_thread_does_not_inherit() -> None:
    seen: dict[str, Any] = {}

    def worker() -> None:
        seen["enabled"] = torch.is_autocast_enabled("cpu")
        seen["dtype"] = out_dtype(LOWER)
        with reference_impl.trace_casts() as log:
            out_dtype(LOWER)
        seen["records"] = len(log)

    with reference_impl.autocast("cpu"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert out_dtype(LOWER) == torch.bfloat16
    assert seen == {"enabled": False, "dtype": torch.float32, "records": 0}


def test_unsupported_dtype_follows_the_spec_rule() -> None:
    rule = CPU.unsupported_dtype
    assert rule is not None
    with pytest.warns(UserWarning, match=rule.message), reference_impl.autocast("cpu", dtype=torch.float64):
        assert not torch.is_autocast_enabled("cpu")


# --- the weight-cast cache ---


def _weight_casts(cache_enabled: bool, regions: int) -> int:
    lin = torch.nn.Linear(8, 4)
    x = torch.randn(2, 8)
    total = 0
    for _ in range(regions):
        with reference_impl.trace_casts() as log, reference_impl.autocast("cpu", cache_enabled=cache_enabled):
            lin(x)
            lin(x)
        total += sum(1 for r in log if r.weight and not r.cached)
    return total


def test_cache_reuses_weight_casts_and_is_cleared_at_outermost_exit() -> None:
    assert _weight_casts(True, 1) == 2  # weight and bias cast once, reused by the second call
    assert _weight_casts(True, 2) == 4  # cleared at exit: cast again in the next region
    assert _weight_casts(False, 1) == 4  # cache off: cast at every call


def test_cache_only_for_leaf_weights_requiring_grad() -> None:
    x = torch.randn(2, 8, requires_grad=True)  # a leaf that requires grad: cached like a weight
    w = torch.randn(4, 8)  # no grad: never cached
    with reference_impl.trace_casts() as log, reference_impl.autocast("cpu"):
        for _ in range(2):
            torch.nn.functional.linear(x * 1, w)  # x * 1 is not a leaf
            torch.nn.functional.linear(x, w)
    cached = {(r.arg, r.cached) for r in log if r.cached}
    assert cached == {("input", True)}, log


def _weight_or_not(region: Callable[[], Any], weight_first: bool) -> list[torch.Tensor]:
    """One op called on a weight, a plain tensor and a leaf view (same dtypes, so one memoized
    plan serves all three calls), each modified in place between two rounds of calls: a
    cached cast keeps the old values, a fresh one sees the new."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, generator=g)
    w = torch.randn(4, 8, generator=g, requires_grad=True)  # a weight: cached
    u = torch.randn(4, 8, generator=g)  # no grad: cast afresh
    v = torch.randn(4, 8, generator=g)[:].requires_grad_()  # a leaf that is a view: cast afresh
    order = (w, u, v) if weight_first else (v, u, w)
    outs = []
    with region():
        outs += [torch.nn.functional.linear(x, t) for t in order]
        with torch.no_grad():
            for t in order:
                t.add_(1)
        outs += [torch.nn.functional.linear(x, t) for t in order]
    return outs


def _traced_reference() -> Any:
    stack = contextlib.ExitStack()
    stack.enter_context(reference_impl.trace_casts())
    stack.enter_context(reference_impl.autocast("cpu"))
    return stack


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
@pytest.mark.parametrize("weight_first", [True, False], ids=["weight-first", "weight-last"])
def test_cache_tests_each_call_s_tensors(weight_first: bool, traced: bool) -> None:
    native = _weight_or_not(lambda: torch.autocast("cpu"), weight_first)
    reference = _traced_reference if traced else lambda: reference_impl.autocast("cpu")
    ref = _weight_or_not(reference, weight_first)
    unchanged = [torch.equal(a, b) for a, b in zip(native[:3], native[3:], strict=True)]
    assert unchanged == ([True, False, False] if weight_first else [False, False, True])  # only w cached
    for n, r in zip(native, ref, strict=True):
        torch.testing.assert_close(r, n, rtol=0, atol=0)


def _casts_made(log: Any) -> list[tuple[str, str, torch.dtype | None, torch.dtype]]:
    return [(r.op, r.arg, r.from_dtype, r.to_dtype) for r in log]


def test_memo_gives_each_kind_of_call_its_own_plan() -> None:
    """One region, so memoized plans serve later calls: outputs as native, and casts as a
    fresh spec (memo empty) makes them for each call alone."""
    with torch.autocast("cpu"):
        native = [call() for call in mixed_calls()]
    with reference_impl.trace_casts() as log, reference_impl.autocast("cpu"):
        ref = [call() for call in mixed_calls()]
    assert len({n.dtype for n in native}) > 2  # the calls differ in what autocast does
    for n, r in zip(native, ref, strict=True):
        torch.testing.assert_close(r, n, rtol=0, atol=0)
    alone = []
    for i, call in enumerate(mixed_calls()):
        fresh = dataclasses.replace(SPEC, content_hash=f"fresh-{i}")
        with reference_impl.trace_casts() as one, reference_impl.autocast("cpu", spec=fresh):
            call()
        alone += _casts_made(one)
    assert _casts_made(log) == alone


def test_apply_plan_cache_callback_tests_each_tensor() -> None:
    """The cast callback of plans with casts beyond positional arguments: the plan's cast
    qualifies for the cache, the tensor decides (a plan memoized for a weight meets a plain tensor)."""
    cast = weight_cache.cached_cast(False, weight_tensor(SPEC.rules.cache))
    c = ArgCast(("args", 0), torch.float32, torch.bfloat16, weight=True, cacheable=True)
    w, u = torch.randn(4, requires_grad=True), torch.randn(4)
    with reference_impl.autocast("cpu"):
        assert cast(c, w) is cast(c, w)
        assert cast(c, u) is not cast(c, u)


# --- tracing ---


def test_trace_records_inside_and_nothing_outside() -> None:
    with reference_impl.trace_casts() as log:
        out_dtype(LOWER)
        with torch.autocast("cpu"):
            out_dtype(LOWER)  # native region: not the reference
        assert len(log) == 0
        with reference_impl.autocast("cpu"):
            out_dtype(LOWER)
        n = len(log)
        out_dtype(LOWER)
    assert n > 0 and len(log) == n
    assert all(r.op == LOWER and r.to_dtype == torch.bfloat16 for r in log)
    assert {"op", "arg", "from_dtype", "to_dtype", "policy", "cached"} <= set(dataclasses.asdict(log[0]))
    text = str(log)
    assert LOWER in text and "bfloat16" in text and str(Policy.LOWER_PRECISION_FP) in text


# --- the spec drives it: a planted deviation changes the behavior ---


def test_op_missing_from_the_spec_falls_through() -> None:
    spec = spec_without(LOWER)
    with reference_impl.autocast("cpu", spec=spec):
        assert out_dtype(LOWER) == torch.float32  # native would give bfloat16
    with reference_impl.autocast("cpu"):
        assert out_dtype(LOWER) == torch.bfloat16


def test_two_specs_at_once_are_refused() -> None:
    planted = spec_without(LOWER)
    with (
        reference_impl.autocast("cpu"),
        pytest.raises(RuntimeError, match="another spec"),
        reference_impl.autocast("cpu", spec=planted),
    ):
        pass
    assert not registered("cpu")

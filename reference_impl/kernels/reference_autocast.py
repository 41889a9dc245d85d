"""The whole-program reference autocast: the spec's policy, in the dispatcher.

``autocast(device_type, ...)`` behaves like ``torch.autocast``: it sets the same
thread-local autocast state (enabled, dtype, cache flag, nesting), and while it is
open the reference's kernels handle the device's autocast ops in this thread. Each
kernel asks the policy engine for the plan (memoized per kind of call: dtypes and
devices of the tensors, other arguments by value; whether a cast tensor is a weight is
tested on each call), makes the casts through :func:`reference_impl.engine.oracle.apply_plan`
with the weight-cast cache and tracing plugged in, and calls on below autocast. Ops the installed torch
autocasts but the spec does not list run untouched.

Where the kernels sit and how a region switches them on is
:mod:`reference_impl.kernels.reference_dispatch`'s job: for cpu (and the other devices whose
Autocast key ranks below the borrowed ``AutocastIPU``) they are installed once and
switched on per thread, so entering a region registers nothing and native autocast
in other threads is untouched; for mps, cuda and privateuse1 they are registered at
the device's own key while a region is open. Limit: a reference region nested inside
a native one clears its own cache when it exits.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar

import torch

from autocast_spec.model import DeviceSpec, Policy, Spec

from ..engine.dtypes import dtype_name
from ..engine.eligibility import weight_tensor
from ..engine.oracle import CastFn, apply_plan, caster, to_dtype
from ..engine.policy import ArgCast, AutocastState, CastPlan, decide, higher_order_cast
from ..engine.signatures import Path, signature
from ..engine.torch_registry import autocast_registrations, dispatch_key, op_exists, op_overload
from ..spectools.installed_spec import load_installed_spec
from . import reference_dispatch, trace, weight_cache
from .device_kernels import Describe, DeviceKernels, Handler, Kernel
from .plan_memo import MEMO_SIZE, NativePlan, Positional, call_key_for, native_plan, positional_casts
from .reference_dispatch import Registration
from .weight_cache import cached_cast, from_cache

F = TypeVar("F", bound=Callable[..., Any])


@functools.lru_cache(maxsize=1)
def default_spec() -> Spec:
    """The bundled spec for the installed torch (loaded once)."""
    return load_installed_spec()


# ---------------------------------------------------------------------------
# Thread-local state of the reference (the torch autocast state is torch's own)
# ---------------------------------------------------------------------------


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.regions: list[autocast] = []


_TLS = _ThreadState()


def _innermost(device: str) -> autocast | None:
    for region in reversed(_TLS.regions):
        if region.device == device:
            return region
    return None


def _arg_name(op: str, path: Path) -> str:
    where, key, *rest = path
    name = signature(op).slots[key].name if where == "args" else str(key)  # type: ignore[index]
    return name + "".join(f"[{i}]" for i in rest)


def _traced_cast(
    plan: CastPlan, use_cache: bool, by_dtype: bool, weight: Callable[[torch.Tensor], bool]
) -> CastFn:
    """The cast callback while ``trace_casts`` is open: casts as usual and records each cast."""
    policy = str(plan.policy)

    def cast(c: ArgCast, src: torch.Tensor) -> torch.Tensor:
        is_weight = c.cacheable and weight(src)
        cached = is_weight and use_cache
        new, hit = (
            from_cache(src, c.to_dtype, caster(c.to_dtype), by_dtype) if cached else (to_dtype(c, src), False)
        )
        arg = _arg_name(plan.op, c.path)
        record = trace.cast_record(
            plan.op, arg, c, src, new, policy, is_weight, hit=hit, stored=cached and not hit
        )
        trace.emit(record)
        return new

    return cast


def _trace_dtype_args(plan: CastPlan, args: Sequence[Any]) -> None:
    if plan.set_dtype is None:
        return
    first = args[0] if args else None
    src_dtype = first.dtype if isinstance(first, torch.Tensor) else None
    for path in plan.dtype_paths:
        arg = str(path[-1]) if path[0] == "kwargs" else "dtype"
        trace.emit(trace.CastRecord(plan.op, arg, src_dtype, plan.set_dtype, str(plan.policy)))


# ---------------------------------------------------------------------------
# The kernels
# ---------------------------------------------------------------------------

# What a memoized call does: (plan, the target overload, untouched, a cast the cache may serve,
# the casts by argument index when that is all the plan does, the plan for the C++ kernels).
_Step = tuple[CastPlan, Callable[..., Any], bool, bool, "Positional | None", "NativePlan | None"]


def _handler(op: str, dspec: DeviceSpec, spec: Spec) -> tuple[Handler, Describe]:
    """The reference's autocast of ``op`` on ``dspec.device``: plan (memoized), casts, call;
    and the plan of a call as the C++ kernels keep it."""
    device = dspec.device
    rules = spec.rules
    info = spec.op_info(op)
    memo: dict[Any, _Step] = {}
    call_key = call_key_for(op)
    by_dtype = rules.cache.key == "source_and_dtype"
    weight = weight_tensor(rules.cache)
    cached = cached_cast(by_dtype, weight)
    inference_cache = rules.cache.in_inference_mode
    guard = torch._C._ExcludeDispatchKeyGuard
    get_dtype = torch.get_autocast_dtype
    cache_enabled = torch.is_autocast_cache_enabled
    inference = torch.is_inference_mode_enabled
    tracing = trace.tracing

    def decided(key: Any, dtype: torch.dtype, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Step:
        plan = decide(dspec, rules, AutocastState(device, dtype, True), op, args, kwargs, info)
        target = op_overload(plan.target_op)._op  # the C++ entry, without OpOverload.__call__
        step = (
            plan,
            target,
            plan.untouched,
            any(c.cacheable for c in plan.casts),
            positional_casts(plan),
            native_plan(plan),
        )
        if key is not None:
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[key] = step
        return step

    def handle(
        args: tuple[Any, ...], kwargs: dict[str, Any], below: torch._C.DispatchKeySet, in_region: bool
    ) -> Any:
        dtype = get_dtype(device)
        try:
            key: Any = call_key(dtype, args, kwargs)
            step = memo.get(key) or decided(key, dtype, args, kwargs)
        except TypeError:  # an unhashable argument: decide without the memo
            step = decided(None, dtype, args, kwargs)
        plan, target, untouched, weights, positional, _ = step
        if untouched:
            with guard(below):
                return target(*args, **kwargs)
        if in_region and tracing():
            use_cache = weights and cache_enabled() and (inference_cache or not inference())
            with guard(below):
                a, k = apply_plan(plan, args, kwargs, _traced_cast(plan, use_cache, by_dtype, weight))
                _trace_dtype_args(plan, args)
                return target(*a, **k)
        use_cache = weights and in_region and cache_enabled() and (inference_cache or not inference())
        with guard(below):
            if positional is None:
                a, k = apply_plan(plan, args, kwargs, cached if use_cache else to_dtype)
                return target(*a, **k)
            # apply_plan's work for a plan of positional casts only, without its generality
            b = list(args)
            if use_cache:
                for i, make, cache_as in positional:
                    src = b[i]
                    b[i] = (
                        from_cache(src, cache_as, make, by_dtype)[0]
                        if cache_as and weight(src)
                        else make(src)
                    )
            else:
                for i, make, _ in positional:
                    b[i] = make(b[i])
            return target(*b, **kwargs)

    def describe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> NativePlan | None:
        dtype = get_dtype(device)
        try:
            key: Any = call_key(dtype, args, kwargs)
        except TypeError:  # unhashable: no memo here, none in C++ either
            return None
        return (memo.get(key) or decided(key, dtype, args, kwargs))[5]

    return handle, describe


def _always_on(op: str, handle: Handler, dspec: DeviceSpec, key: torch._C.DispatchKey) -> Kernel:
    below = torch._C.DispatchKeySet(key)
    device = dspec.device

    def kernel(*args: Any, **kwargs: Any) -> Any:
        return handle(args, kwargs, below, _innermost(device) is not None)

    banned = dspec.ops[op].policy is Policy.BANNED
    kernel.__name__ = f"reference_autocast[{op}]" + ("(banned)" if banned else "")
    return kernel


def op_kernel(op: str, dspec: DeviceSpec, spec: Spec, key: torch._C.DispatchKey) -> Kernel:
    """A plain kernel for ``op`` at ``key`` (the device's Autocast key): the spec's policy
    wherever it runs, with the weight cache inside a reference region of the device."""
    return _always_on(op, _handler(op, dspec, spec)[0], dspec, key)


_KERNELS: dict[tuple[int, str], DeviceKernels] = {}
_KERNELS_KEPT = 32  # specs whose kernels are kept built


def device_kernels(spec: Spec, dspec: DeviceSpec) -> DeviceKernels:
    """The reference's kernels for one spec and device, built once."""
    cache_key = (id(spec), dspec.device)
    built = _KERNELS.get(cache_key)
    if built is not None and built.spec is spec:
        return built
    native_key = dispatch_key(dspec.dispatch_key)
    made = {op: _handler(op, dspec, spec) for op in sorted(dspec.ops) if op_exists(op)}
    handlers = {op: h for op, (h, _) in made.items()}
    built = DeviceKernels(
        spec=spec,
        device=dspec.device,
        dispatch_key=dspec.dispatch_key,
        handlers=handlers,
        describe={op: d for op, (_, d) in made.items()},
        always_on={op: _always_on(op, h, dspec, native_key) for op, h in handlers.items()},
        native_only=autocast_registrations(dspec.dispatch_key) - set(dspec.ops),
        higher_order={k.op: higher_order_cast(k, dspec.device) for k in dspec.higher_order_ops},
    )
    if len(_KERNELS) >= _KERNELS_KEPT:
        _KERNELS.clear()
    _KERNELS[cache_key] = built
    return built


@contextlib.contextmanager
def kernels_installed(device_type: str, spec: Spec | None = None) -> Iterator[None]:
    """Keep the reference kernels registered at ``device_type``'s Autocast key, without
    entering autocast: native autocast regions (``torch.autocast``, or the thread-local
    state set directly) in every thread then follow the spec too. This is how the
    conformance suite runs with the reference standing in for a backend's autocast
    (self-conformance). The weight-cast cache stays the reference region's: only
    ``autocast`` regions cache.
    """
    s = spec if spec is not None else default_spec()
    kernels = device_kernels(s, s.device(device_type))
    Registration.acquire(kernels)
    try:
        yield
    finally:
        Registration.release(kernels)


def registered(device_type: str, spec: Spec | None = None) -> bool:
    """Whether reference kernels handle ``device_type``'s autocast in this thread now."""
    dspec = (spec or default_spec()).device(device_type)
    return reference_dispatch.intercepting(device_type, dspec.dispatch_key)


# ---------------------------------------------------------------------------
# The public context manager / decorator
# ---------------------------------------------------------------------------


class autocast:  # lower case: mirrors torch.autocast
    """``torch.autocast`` with the spec's policy: a context manager and a decorator.

    ``autocast("cpu")``, ``autocast("cpu", dtype=torch.float16)``, ``@autocast("cpu")``.
    ``dtype`` None takes the current autocast dtype of the device (as native);
    ``cache_enabled`` None keeps the current cache flag (as native).
    """

    def __init__(
        self,
        device_type: str,
        dtype: torch.dtype | None = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
        spec: Spec | None = None,
    ) -> None:
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.spec = spec if spec is not None else default_spec()
        self.dspec = self.spec.device(device_type)
        self.device = device_type
        self.fast_dtype = torch.get_autocast_dtype(device_type) if dtype is None else dtype
        self._cache_enabled = torch.is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        self._ctor = (device_type, dtype, enabled, cache_enabled, self.spec)
        if enabled and dtype_name(self.fast_dtype) not in self.dspec.supported_dtypes:
            rule = self.dspec.unsupported_dtype
            message = (
                rule.text(device_type)
                if rule
                else f"{device_type} autocast does not support {self.fast_dtype}"
            )
            if rule is not None and rule.action == "error":
                raise RuntimeError(message)
            warnings.warn(message, stacklevel=2)
            enabled = False
        self._enabled = enabled
        self._prev: tuple[bool, torch.dtype, bool] | None = None
        self._kernels: DeviceKernels | None = None

    def __enter__(self) -> autocast:
        self._prev = (
            torch.is_autocast_enabled(self.device),
            torch.get_autocast_dtype(self.device),
            torch.is_autocast_cache_enabled(),
        )
        kernels = device_kernels(self.spec, self.dspec)
        reference_dispatch.enter(kernels)
        try:
            torch.set_autocast_enabled(self.device, self._enabled)
            torch.set_autocast_dtype(self.device, self.fast_dtype)
            torch.autocast_increment_nesting()
            torch.set_autocast_cache_enabled(self._cache_enabled)
            _TLS.regions.append(self)
        except BaseException:
            reference_dispatch.leave(kernels)
            raise
        self._kernels = kernels
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        assert self._prev is not None, "__exit__ without __enter__"
        if _TLS.regions and _TLS.regions[-1] is self:
            _TLS.regions.pop()
        else:  # exited out of order: drop this region wherever it is
            _TLS.regions.remove(self)
        if torch.autocast_decrement_nesting() == 0:
            torch.clear_autocast_cache()
        if not _TLS.regions or self.spec.rules.cache.cleared_at == "every_exit":
            weight_cache.clear()
        enabled, dtype, cache = self._prev
        torch.set_autocast_enabled(self.device, enabled)
        torch.set_autocast_dtype(self.device, dtype)
        torch.set_autocast_cache_enabled(cache)
        self._prev = None
        kernels, self._kernels = self._kernels, None
        if kernels is not None:
            reference_dispatch.leave(kernels)
        return False

    def __call__(self, func: F) -> F:
        if not callable(func):
            raise TypeError(f"autocast()(func) requires a callable, but got {type(func).__name__}")

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with autocast(*self._ctor):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return (
            f"reference_impl.autocast({self.device!r}, dtype={self.fast_dtype}, enabled={self._enabled}, "
            f"cache_enabled={self._cache_enabled})"
        )

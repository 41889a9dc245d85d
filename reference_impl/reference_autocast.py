"""The whole-program reference autocast: the spec's policy, in the dispatcher.

``autocast(device_type, ...)`` behaves like ``torch.autocast``: it sets the same
thread-local autocast state (enabled, dtype, cache flag, nesting), so the
``Autocast<Device>`` dispatch key is active exactly where native autocast would
be. While at least one reference region is open in the process, this module
keeps Python kernels registered at that key (with ``torch.library``) for every
op the device spec lists; they ask the policy engine for the plan, make the
casts (with the weight-cast cache) and redispatch below autocast. Ops the
installed torch registers at the key but the spec does not list are registered
as fallthrough, so they run untouched. Registering overrides the native
kernels; destroying the library when the last region closes restores them.

Registration is this module's side effect and lives in :class:`_Registration`
alone. Limits: kernels are process-wide, so while a reference region is open
native autocast in *other* threads also follows the spec (without the weight
cache); a reference region nested inside a native one clears its own cache when
it exits.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar

import torch

from autocast_spec.model import DeviceSpec, Policy, Spec

from . import trace
from .dtypes import dtype_name
from .installed_spec import load_installed_spec
from .oracle import BannedOpError, _get, _set, bind_all
from .policy import AutocastState, CastPlan, decide
from .signatures import Path, signature
from .torch_registry import autocast_registrations, dispatch_key, op_exists, op_overload, split_op_name

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
        # The weight-cast cache: id(source) (with the dtype under rules.cache.key
        # source_and_dtype) -> (weakref to source, cast copy).
        self.cache: dict[Any, tuple[weakref.ReferenceType[torch.Tensor], torch.Tensor]] = {}


_TLS = _ThreadState()


def _innermost(device: str) -> autocast | None:
    for region in reversed(_TLS.regions):
        if region.device == device:
            return region
    return None


def clear_cache() -> None:
    """Drop this thread's reference weight-cast cache."""
    _TLS.cache.clear()


# ---------------------------------------------------------------------------
# The kernels
# ---------------------------------------------------------------------------


def _arg_name(op: str, path: Path) -> str:
    where, key, *rest = path
    name = signature(op).slots[key].name if where == "args" else str(key)  # type: ignore[index]
    return name + "".join(f"[{i}]" for i in rest)


def _cast(
    plan: CastPlan,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    use_cache: bool,
    record: bool,
    by_dtype: bool = False,
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``apply_plan`` with ``cached_cast``'s weight cache and tracing."""
    a = list(args)
    k = dict(kwargs)
    policy = str(plan.policy)
    for c in plan.casts:
        src = _get(a, k, c.path)
        hit = False
        if c.weight and use_cache:
            key = (id(src), c.to_dtype) if by_dtype else id(src)
            entry = _TLS.cache.get(key)
            if entry is not None and entry[0]() is src:
                new, hit = entry[1], True
            else:
                new = src.to(c.to_dtype)
                _TLS.cache[key] = (weakref.ref(src), new)
        else:
            new = src.to(c.to_dtype)
        _set(a, k, c.path, new)
        if record:
            trace.emit(
                trace.CastRecord(
                    plan.op, _arg_name(plan.op, c.path), c.from_dtype, c.to_dtype, policy, hit, c.weight
                )
            )
    if plan.append_target is not None:
        a, k = bind_all(plan.op, a, k)
    if plan.set_dtype is not None:
        first = a[0] if a else None
        for path in plan.dtype_paths:
            if path[0] == "kwargs":
                k[str(path[1])] = plan.set_dtype
            else:
                _set(a, k, path, plan.set_dtype)
            if record:
                src_dtype = first.dtype if isinstance(first, torch.Tensor) else None
                trace.emit(
                    trace.CastRecord(
                        plan.op,
                        str(path[-1]) if path[0] == "kwargs" else "dtype",
                        src_dtype,
                        plan.set_dtype,
                        policy,
                    )
                )
    return tuple(a), k


def _make_kernel(op: str, dspec: DeviceSpec, spec: Spec, key: torch._C.DispatchKey) -> Callable[..., Any]:
    below = torch._C.DispatchKeySet(key)
    device = dspec.device
    rules = spec.rules
    info = spec.op_info(op)
    banned = dspec.ops[op].policy is Policy.BANNED

    def kernel(*args: Any, **kwargs: Any) -> Any:
        region = _innermost(device)
        state = AutocastState(device, torch.get_autocast_dtype(device), True)
        plan = decide(dspec, rules, state, op, args, kwargs, info)
        if plan.raises is not None:
            raise BannedOpError(plan.raises) if banned else RuntimeError(plan.raises)
        use_cache = region is not None and torch.is_autocast_cache_enabled()
        if torch.is_inference_mode_enabled() and not rules.cache.in_inference_mode:
            use_cache = False
        record = region is not None and trace.tracing()
        with torch._C._ExcludeDispatchKeyGuard(below):
            if plan.untouched:
                return op_overload(op)(*args, **kwargs)
            a, k = _cast(plan, args, kwargs, use_cache, record, rules.cache.key == "source_and_dtype")
            return op_overload(plan.target_op)(*a, **k)

    kernel.__name__ = f"reference_autocast[{op}]" + ("(banned)" if banned else "")
    return kernel


Kernel = Callable[..., Any]
_PLANS: dict[tuple[int, str], tuple[Spec, tuple[tuple[str, str, Kernel], ...]]] = {}


def _install_plan(spec: Spec, dspec: DeviceSpec) -> tuple[tuple[str, str, Kernel], ...]:
    """(namespace, "name.overload", kernel) for every op: reference kernels for the
    spec's ops, fallthrough for ops torch registers at the key that the spec omits.
    Built once per spec and device (registration happens at every outermost entry)."""
    key = (id(spec), dspec.device)
    cached = _PLANS.get(key)
    if cached is not None and cached[0] is spec:
        return cached[1]
    autocast_key = dispatch_key(dspec.dispatch_key)
    plan: list[tuple[str, str, Kernel]] = []
    native = autocast_registrations(dspec.dispatch_key)
    for op in sorted(dspec.ops):
        if op_exists(op):
            ns, name, overload = split_op_name(op)
            kernel = _make_kernel(op, dspec, spec, autocast_key)
            plan.append((ns, f"{name}.{overload}" if overload else name, kernel))
    for op in sorted(native - set(dspec.ops)):
        ns, name, overload = split_op_name(op)
        plan.append((ns, f"{name}.{overload}" if overload else name, torch.library.fallthrough_kernel))
    _PLANS[key] = (spec, tuple(plan))
    return tuple(plan)


class _Registration:
    """The kernels of one device spec at its Autocast key, shared by all open regions.

    Opened by the first region (any thread) and destroyed by the last, which
    restores the native kernels.
    """

    _lock = threading.Lock()
    _open: dict[str, tuple[_Registration, int]] = {}  # dispatch key -> (registration, users)

    def __init__(self, spec: Spec, dspec: DeviceSpec) -> None:
        self.spec = spec
        self.dspec = dspec
        self.libs: dict[str, torch.library.Library] = {}

    def _lib(self, ns: str) -> torch.library.Library:
        if ns not in self.libs:
            self.libs[ns] = torch.library.Library(ns, "IMPL")
        return self.libs[ns]

    def _install(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
            for ns, name, kernel in _install_plan(self.spec, self.dspec):
                self._lib(ns).impl(name, kernel, self.dspec.dispatch_key)

    def _uninstall(self) -> None:
        for lib in self.libs.values():
            lib._destroy()
        self.libs.clear()

    @classmethod
    def acquire(cls, spec: Spec, dspec: DeviceSpec) -> None:
        with cls._lock:
            current = cls._open.get(dspec.dispatch_key)
            if current is None:
                reg = cls(spec, dspec)
                reg._install()
                cls._open[dspec.dispatch_key] = (reg, 1)
                return
            reg, users = current
            if reg.spec is not spec and reg.spec.content_hash != spec.content_hash:
                raise RuntimeError(
                    f"a reference autocast region for {dspec.device} with another spec is open; "
                    "close it before opening one with a different spec"
                )
            cls._open[dspec.dispatch_key] = (reg, users + 1)

    @classmethod
    def release(cls, dspec: DeviceSpec) -> None:
        with cls._lock:
            reg, users = cls._open[dspec.dispatch_key]
            if users == 1:
                del cls._open[dspec.dispatch_key]
                reg._uninstall()
            else:
                cls._open[dspec.dispatch_key] = (reg, users - 1)

    @classmethod
    def active(cls, dispatch_key: str) -> bool:
        return dispatch_key in cls._open


@contextlib.contextmanager
def kernels_installed(device_type: str, spec: Spec | None = None) -> Iterator[None]:
    """Keep the reference kernels registered at ``device_type``'s Autocast key, without
    entering autocast: native autocast regions (``torch.autocast``, or the thread-local
    state set directly) then follow the spec too. This is how the conformance suite
    runs with the reference standing in for a backend's autocast (self-conformance).
    The weight-cast cache stays the reference region's: only ``autocast`` regions cache.
    """
    s = spec if spec is not None else default_spec()
    dspec = s.device(device_type)
    _Registration.acquire(s, dspec)
    try:
        yield
    finally:
        _Registration.release(dspec)


def registered(device_type: str, spec: Spec | None = None) -> bool:
    """Whether reference kernels are installed now for ``device_type``."""
    return _Registration.active((spec or default_spec()).device(device_type).dispatch_key)


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
            message = rule.message if rule else f"{device_type} autocast does not support {self.fast_dtype}"
            if rule is not None and rule.action == "error":
                raise RuntimeError(message)
            warnings.warn(message, stacklevel=2)
            enabled = False
        self._enabled = enabled
        self._prev: tuple[bool, torch.dtype, bool] | None = None

    def __enter__(self) -> autocast:
        self._prev = (
            torch.is_autocast_enabled(self.device),
            torch.get_autocast_dtype(self.device),
            torch.is_autocast_cache_enabled(),
        )
        _Registration.acquire(self.spec, self.dspec)
        try:
            torch.set_autocast_enabled(self.device, self._enabled)
            torch.set_autocast_dtype(self.device, self.fast_dtype)
            torch.autocast_increment_nesting()
            torch.set_autocast_cache_enabled(self._cache_enabled)
            _TLS.regions.append(self)
        except BaseException:
            _Registration.release(self.dspec)
            raise
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
            clear_cache()
        enabled, dtype, cache = self._prev
        torch.set_autocast_enabled(self.device, enabled)
        torch.set_autocast_dtype(self.device, dtype)
        torch.set_autocast_cache_enabled(cache)
        self._prev = None
        _Registration.release(self.dspec)
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

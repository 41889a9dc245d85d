"""Where the reference autocast's kernels sit in the dispatcher, and how they are switched on.

Two mechanisms, chosen per device by where its native Autocast key sits:

* **The reference key** (devices whose native key ranks below it: cpu, mtia, maia,
  xpu). The reference borrows :data:`REFERENCE_KEY`, an Autocast dispatch key no
  backend of this torch uses (``AutocastIPU``, among the Autocast keys: above
  autograd and below functorch's keys, where native autocast sits). Its kernels
  are registered there once per process, with a fallthrough fallback for every
  other op, and stay. A thread switches them on by adding the key to its
  thread-local dispatch key set while it has a reference region open (so
  ``torch.is_autocast_enabled("ipu")`` reads True there): entering a region
  registers nothing, native kernels are never overridden, and other threads never
  see the reference. A kernel asks the dispatch key set of the call whether native
  autocast would have run (the device's Autocast key is there: autocast enabled
  and an argument on the device) and, if not, redispatches untouched. The kernels
  there are the C++ ones of :mod:`reference_impl.kernels.fast_kernels` where they build
  (memoized plans run in C++; everything else calls the handler, in Python), else
  Python trampolines that call the handler every time.
* **The native key** (mps, cuda, privateuse1, hpu: keys above the borrowed one, so
  the native kernel would run first). Kernels are registered at the device's own
  Autocast key while a region is open anywhere in the process (:class:`Registration`),
  as :func:`reference_impl.kernels.reference_autocast.kernels_installed` does for the
  conformance suite's self-conformance runs.

This module owns both side effects; it knows nothing of policies: the per-op
handlers come in a :class:`DeviceKernels`.
"""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..engine.torch_registry import autocast_registrations, op_overload
from . import fast_kernels, trace
from .device_kernels import (
    REFERENCE_KEY,
    REFERENCE_KEY_NAME,
    DeviceKernels,
    Handler,
    another_spec,
    impl_name,
    library,
    rank,
    same_spec,
)

# ---------------------------------------------------------------------------
# The reference key: registered once, switched per thread
# ---------------------------------------------------------------------------


@dataclass(eq=False)
class _Active:
    """One device with reference regions open in this thread."""

    kernels: DeviceKernels
    native_key: torch._C.DispatchKey
    handlers: Mapping[str, Handler]
    regions: int
    below: torch._C.DispatchKeySet  # excluded when a handler calls on
    below_keys: tuple[torch._C.DispatchKey, ...] = ()  # the same, for the C++ kernels


class _Thread(threading.local):
    def __init__(self) -> None:
        self.devices: tuple[_Active, ...] = ()  # highest-ranked native key first
        self.exclude = torch._C.DispatchKeySet(REFERENCE_KEY)  # for calls the reference leaves alone
        self.exclude_keys: tuple[torch._C.DispatchKey, ...] = (REFERENCE_KEY,)
        self.saved: tuple[bool, bool] = (False, True)  # the key's (included, excluded) before


_THREAD = _Thread()
_LOCK = threading.Lock()
_REF_LIBS: dict[str, torch.library.Library] = {}
_REF_OPS: dict[str, int] = {}  # op -> its index in the C++ kernels' tables
_REF_KERNELS: weakref.WeakSet[DeviceKernels] = weakref.WeakSet()  # their ops all registered
_TABLES: weakref.WeakKeyDictionary[DeviceKernels, Any] = weakref.WeakKeyDictionary()  # C++ tables


def _trampoline(op: str) -> Callable[..., Any]:
    call = op_overload(op)._op  # the C++ entry, without OpOverload.__call__
    guard = torch._C._ExcludeDispatchKeyGuard

    def kernel(keys: torch._C.DispatchKeySet, *args: Any, **kwargs: Any) -> Any:
        t = _THREAD
        for dev in t.devices:
            # Native autocast runs where its key is in the call's key set: autocast enabled
            # for the device and an argument on it.
            if keys.has(dev.native_key):
                handler = dev.handlers.get(op)
                if handler is not None:
                    return handler(args, kwargs, dev.below, True)
        with guard(t.exclude):
            return call(*args, **kwargs)

    kernel.__name__ = f"reference_autocast_switch[{op}]"
    return kernel


def _python_entry(op: str, device: str) -> Callable[..., Any]:
    """What the C++ kernel of ``op`` calls for ``device`` when its memo has no plan: the
    handler, and the plan's description for the memo (``want_plan``)."""

    def entry(args: tuple[Any, ...], kwargs: dict[str, Any], want_plan: bool) -> tuple[Any, Any]:
        dev = next(d for d in _THREAD.devices if d.kernels.device == device)
        plan = dev.kernels.describe[op](args, kwargs) if want_plan else None
        return dev.handlers[op](args, kwargs, dev.below, True), plan

    return entry


def _table(kernels: DeviceKernels, ext: Any) -> Any:
    """The C++ kernels' table of ``kernels``: the cache rule, and a Python entry per op."""
    table = _TABLES.get(kernels)
    if table is None:
        cache = kernels.spec.rules.cache
        table = ext.Table(
            kernels.device,
            cache.key == "source_and_dtype",
            cache.requires_grad_only,
            cache.leaf_only,
            cache.exclude_views,
            cache.in_inference_mode,
        )
        for op in kernels.handlers:
            table.set(_REF_OPS[op], _python_entry(op, kernels.device))
        _TABLES[kernels] = table
    return table


def _install_reference_key(kernels: DeviceKernels) -> None:
    """Register the switch kernels this spec needs at the reference key (once per op): the
    C++ kernels where they can be built, else the Python trampolines."""
    if kernels in _REF_KERNELS:  # every later region of these kernels: nothing to do
        return
    ext = fast_kernels.extension()
    with _LOCK:
        if not _REF_OPS:
            foreign = autocast_registrations(REFERENCE_KEY_NAME)
            if foreign:
                raise RuntimeError(
                    f"the reference autocast borrows the {REFERENCE_KEY_NAME} dispatch key, but another "
                    f"library registered kernels there ({sorted(foreign)[:3]}...)"
                )
            fallback = torch.library.Library("_", "IMPL")
            fallback.fallback(torch.library.fallthrough_kernel, REFERENCE_KEY_NAME)
            _REF_LIBS["_"] = fallback
        for op in sorted((set(kernels.handlers) | kernels.native_only) - set(_REF_OPS)):
            ns, name = impl_name(op)
            index = len(_REF_OPS)
            if ext is not None:
                ext.register_op(ns, name, REFERENCE_KEY, index)
            else:
                library(_REF_LIBS, ns).impl(name, _trampoline(op), REFERENCE_KEY_NAME, with_keyset=True)
            _REF_OPS[op] = index
        if ext is not None:
            _table(kernels, ext)
        _REF_KERNELS.add(kernels)


def _higher_order_kernel(hop: Any) -> Callable[..., Any]:
    """A higher-order operator's Python kernel at the reference key (an operator has no
    fallthrough there): a device that lists it and whose native autocast would run casts its
    leading arguments; any other call goes on below the reference, as :func:`_trampoline`'s."""
    name = hop.name()
    guard = torch._C._ExcludeDispatchKeyGuard

    def kernel(*args: Any, **kwargs: Any) -> Any:
        t = _THREAD
        for dev in t.devices:
            cast = dev.kernels.higher_order.get(name)
            if cast is not None and _native_would_run(dev, args):
                with guard(dev.below):
                    return hop(*cast(args), **kwargs)
        with guard(t.exclude):
            return hop(*args, **kwargs)

    kernel.__name__ = f"reference_autocast_switch[higher_order::{name}]"
    return kernel


def _native_would_run(dev: _Active, args: tuple[Any, ...]) -> bool:
    """The device's Autocast key would be in the call's key set: not excluded in this thread
    (autocast enabled: the Autocast keys are in the default included set) and a tensor
    argument on the device (a Python kernel is given no key set)."""
    if torch._C._dispatch_tls_is_dispatch_key_excluded(dev.native_key):
        return False
    leaves = torch.utils._pytree.tree_leaves(args)
    return any(isinstance(a, torch.Tensor) and a.device.type == dev.kernels.device for a in leaves)


def _install_higher_order() -> None:
    """A kernel at the reference key for each higher-order operator that has none yet (the
    registry grows as torch's modules import)."""
    for hop in list(torch._ops._higher_order_ops.values()):
        if REFERENCE_KEY not in hop.py_kernels:
            hop.py_impl(REFERENCE_KEY)(_higher_order_kernel(hop))


def _recompute(t: _Thread) -> None:
    keys = (REFERENCE_KEY, *(dev.native_key for dev in t.devices))
    t.exclude_keys = keys
    t.exclude = _key_set(keys)
    for dev in t.devices:
        # Alone: the call goes straight below autocast. With other devices open: only this
        # device's key is excluded, so the next device's reference kernel sees the call too.
        dev.below_keys = keys if len(t.devices) == 1 else (dev.native_key,)
        dev.below = _key_set(dev.below_keys)
    _sync_extension(t)


def _key_set(keys: tuple[torch._C.DispatchKey, ...]) -> torch._C.DispatchKeySet:
    s = torch._C.DispatchKeySet(keys[0])
    for k in keys[1:]:
        s = s.add(k)
    return s


def _sync_extension(t: _Thread) -> None:
    """Tell the C++ kernels what this thread has open (its devices, and whether it traces)."""
    ext = fast_kernels.loaded()
    if ext is not None:
        ext.set_thread(
            [(d.native_key, _TABLES[d.kernels], list(d.below_keys)) for d in t.devices], list(t.exclude_keys)
        )
        ext.set_tracing(trace.tracing())


def _switch_on(kernels: DeviceKernels) -> None:
    _install_reference_key(kernels)
    _install_higher_order()
    t = _THREAD
    for dev in t.devices:
        if dev.kernels.device == kernels.device:
            if not same_spec(dev.kernels.spec, kernels.spec):
                raise another_spec(kernels.device)
            dev.regions += 1
            _sync_extension(t)
            return
    if not t.devices:
        t.saved = (
            torch._C._dispatch_tls_is_dispatch_key_included(REFERENCE_KEY),
            torch._C._dispatch_tls_is_dispatch_key_excluded(REFERENCE_KEY),
        )
        torch._C._dispatch_tls_set_dispatch_key_included(REFERENCE_KEY, True)
        torch._C._dispatch_tls_set_dispatch_key_excluded(REFERENCE_KEY, False)
    new = _Active(kernels, kernels.native_key, kernels.handlers, 1, torch._C.DispatchKeySet(REFERENCE_KEY))
    t.devices = tuple(sorted((*t.devices, new), key=lambda d: -rank(d.native_key)))
    _recompute(t)


def _switch_off(kernels: DeviceKernels) -> None:
    t = _THREAD
    for dev in t.devices:
        if dev.kernels.device == kernels.device:
            dev.regions -= 1
            if dev.regions == 0:
                t.devices = tuple(d for d in t.devices if d is not dev)
                _recompute(t)
            break
    if not t.devices:
        included, excluded = t.saved
        torch._C._dispatch_tls_set_dispatch_key_included(REFERENCE_KEY, included)
        torch._C._dispatch_tls_set_dispatch_key_excluded(REFERENCE_KEY, excluded)


def switched_on(device: str) -> bool:
    """Whether this thread has the reference key switched on for ``device``."""
    return any(d.kernels.device == device for d in _THREAD.devices)


# ---------------------------------------------------------------------------
# The native key: registered while in use, process-wide
# ---------------------------------------------------------------------------


class Registration:
    """The always-on kernels of one device spec at its own Autocast key, shared by all users.

    Opened by the first user (any thread) and destroyed by the last, which restores
    the native kernels.
    """

    _lock = threading.Lock()
    _open: dict[str, tuple[Registration, int]] = {}  # dispatch key -> (registration, users)

    def __init__(self, kernels: DeviceKernels) -> None:
        self.kernels = kernels
        self.libs: dict[str, torch.library.Library] = {}

    def _install(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
            for op, kernel in sorted(self.kernels.always_on.items()):
                ns, name = impl_name(op)
                library(self.libs, ns).impl(name, kernel, self.kernels.dispatch_key)
            for op in sorted(self.kernels.native_only):
                ns, name = impl_name(op)
                library(self.libs, ns).impl(name, torch.library.fallthrough_kernel, self.kernels.dispatch_key)

    def _uninstall(self) -> None:
        for lib in self.libs.values():
            lib._destroy()
        self.libs.clear()

    @classmethod
    def acquire(cls, kernels: DeviceKernels) -> None:
        with cls._lock:
            current = cls._open.get(kernels.dispatch_key)
            if current is None:
                reg = cls(kernels)
                reg._install()
                cls._open[kernels.dispatch_key] = (reg, 1)
                return
            reg, users = current
            if not same_spec(reg.kernels.spec, kernels.spec):
                raise another_spec(kernels.device)
            cls._open[kernels.dispatch_key] = (reg, users + 1)

    @classmethod
    def release(cls, kernels: DeviceKernels) -> None:
        with cls._lock:
            reg, users = cls._open[kernels.dispatch_key]
            if users == 1:
                del cls._open[kernels.dispatch_key]
                reg._uninstall()
            else:
                cls._open[kernels.dispatch_key] = (reg, users - 1)

    @classmethod
    def active(cls, dispatch_key: str) -> bool:
        return dispatch_key in cls._open


# ---------------------------------------------------------------------------
# What a region does
# ---------------------------------------------------------------------------


def enter(kernels: DeviceKernels) -> None:
    """A reference region of ``kernels.device`` opens in this thread."""
    if kernels.switched:
        _switch_on(kernels)
    else:
        Registration.acquire(kernels)


def leave(kernels: DeviceKernels) -> None:
    """The region closes (its :func:`enter` succeeded)."""
    if kernels.switched:
        _switch_off(kernels)
    else:
        Registration.release(kernels)


def intercepting(device: str, dispatch_key_name: str) -> bool:
    """Whether reference kernels handle ``device``'s autocast in this thread now."""
    return switched_on(device) or Registration.active(dispatch_key_name)

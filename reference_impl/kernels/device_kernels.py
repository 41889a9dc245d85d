"""The reference's kernels for one spec on one device (:class:`DeviceKernels`), and the
dispatcher facts both ways of installing them share: the borrowed key, key ranks,
``torch.library`` names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.model import Spec

from ..engine.torch_registry import dispatch_key, split_op_name

REFERENCE_KEY_NAME = "AutocastIPU"
REFERENCE_KEY = dispatch_key(REFERENCE_KEY_NAME)

Handler = Callable[[tuple[Any, ...], dict[str, Any], torch._C.DispatchKeySet, bool], Any]
"""``handler(args, kwargs, below, in_region)``: the reference's autocast for one op on one
device: plan, casts, then the call with the keys ``below`` excluded. ``in_region``: a
reference region of the device is open in this thread (its weight cache and tracing apply)."""

Describe = Callable[[tuple[Any, ...], dict[str, Any]], Any]
"""``describe(args, kwargs)``: the handler's plan for such a call as the C++ kernels keep it,
``(untouched, ((argument index, dtype, cacheable), ...))``, or None when the plan does more
than positional casts (the C++ kernel then calls the handler every time)."""

Kernel = Callable[..., Any]

HigherOrderCast = Callable[[tuple[Any, ...]], tuple[Any, ...]]
"""``cast(args)``: a higher-order operator's positional arguments as the device's listed
policy passes them on (``higher_order_ops`` in the spec)."""


@dataclass(frozen=True, eq=False)
class DeviceKernels:
    """The reference's kernels for one spec on one device.

    ``handlers``: one per spec op this torch has; ``always_on``: the same as plain
    kernels for the device's own Autocast key (they check the region themselves);
    ``native_only``: ops torch registers at that key that the spec does not list
    (the reference leaves them untouched); ``higher_order``: the casts of the
    higher-order operators the device lists, by name.
    """

    spec: Spec
    device: str
    dispatch_key: str
    handlers: Mapping[str, Handler]
    describe: Mapping[str, Describe]
    always_on: Mapping[str, Kernel]
    native_only: frozenset[str]
    higher_order: Mapping[str, HigherOrderCast]

    @property
    def native_key(self) -> torch._C.DispatchKey:
        return dispatch_key(self.dispatch_key)

    @property
    def switched(self) -> bool:
        """Runs at the reference key, switched per thread (else: registered at the native key)."""
        return rank(self.native_key) < rank(REFERENCE_KEY)


def rank(key: torch._C.DispatchKey) -> int:
    """The key's place in the dispatch order: a higher one runs first."""
    rank: int = key.value
    return rank


def same_spec(a: Spec, b: Spec) -> bool:
    return a is b or a.content_hash == b.content_hash


def another_spec(device: str) -> RuntimeError:
    return RuntimeError(
        f"a reference autocast region for {device} with another spec is open; "
        "close it before opening one with a different spec"
    )


def library(libs: dict[str, torch.library.Library], ns: str) -> torch.library.Library:
    if ns not in libs:
        libs[ns] = torch.library.Library(ns, "IMPL")
    return libs[ns]


def impl_name(op: str) -> tuple[str, str]:
    ns, name, overload = split_op_name(op)
    return ns, f"{name}.{overload}" if overload else name

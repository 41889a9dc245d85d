"""Calling autocast's public Python entry points (``spec/python_surface.yaml``): once each, the
way their role uses them (a region entered, a decorator applied, a getter asked, a setter given
the value autocast already holds so that a call changes nothing, a nesting change undone,
``torch.library.register_autocast`` given a fresh custom op); a region's arguments in either
form; and a function compiled afresh the way the suite compiles one (aot_eager)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.surface import EntryPointInfo, Role

from .samples import resolve_entry_point


@dataclass(frozen=True)
class State:
    """Autocast's state for one device: what a setter is given."""

    enabled: bool
    dtype: torch.dtype
    cache_enabled: bool

    @staticmethod
    def of(device: str) -> State:
        on, dtype = torch.is_autocast_enabled(device), torch.get_autocast_dtype(device)
        return State(on, dtype, torch.is_autocast_cache_enabled())


def call_in_role(e: EntryPointInfo, device: str) -> None:
    """Call ``e`` once as its role uses it, about ``device`` unless it is bound to another.

    Its device's state is read first and a setter given it back.
    """
    fn = resolve_entry_point(e.name)
    state = State.of(e.device or device)
    here: tuple[Any, ...] = () if e.device else (device,)
    role = e.role
    if role is Role.REGION:
        with fn(*here):
            pass
    elif role is Role.DECORATOR:
        fn(lambda *args: args, **({} if e.device else {"device_type": device}))
    elif role is Role.ENABLED_SETTER:
        fn(*here, state.enabled)
    elif role is Role.DTYPE_SETTER:
        fn(*here, state.dtype)
    elif role is Role.CACHE_SETTER:
        fn(state.cache_enabled)
    elif role is Role.AVAILABLE:
        fn(device)
    elif role is Role.NESTING_INCREMENT:
        fn()
        torch.autocast_decrement_nesting()
    elif role is Role.NESTING_DECREMENT:
        torch.autocast_increment_nesting()
        fn()
    elif role is Role.REGISTRATION:
        fn(fresh_custom_op(), device, state.dtype)
    elif role in (Role.ENABLED_GETTER, Role.DTYPE_GETTER):
        fn(*here)
    else:  # the cache's query and clear
        fn()


def region_args(
    e: EntryPointInfo, device: str, dtype: torch.dtype, enabled: bool, positional: bool
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A region entry point's arguments, positionally (its ``positional`` parameters, in order)
    or by keyword."""
    values = {"device_type": device, "dtype": dtype, "enabled": enabled, "cache_enabled": True}
    if positional:
        return tuple(values[p] for p in e.positional), {}
    return (), {k: values[k] for k in e.positional}


def compiled_call(fn: Callable[..., Any], *args: Any, fullgraph: bool = True) -> Any:
    """``fn(*args)`` compiled afresh (``torch.compile``, backend aot_eager)."""
    torch._dynamo.reset()
    return torch.compile(fn, backend="aot_eager", fullgraph=fullgraph)(*args)


_NUMBERS = itertools.count()


def fresh_custom_op() -> str:
    """A new ``torch.library.custom_op`` (the identity), by name: each is registered once."""
    name = f"autocast_conformance::surface_{next(_NUMBERS)}"

    @torch.library.custom_op(name, mutates_args=())
    def op(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    return name

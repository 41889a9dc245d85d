"""The oracle: apply a cast plan explicitly and call the real aten kernel.

``oracle_call`` is what per-op numeric comparisons use: it asks the policy
engine for the plan, performs the plan's casts with ``Tensor.to`` (and sets or
appends the dtype argument), then calls the aten overload with every Autocast
dispatch key excluded, so only the kernels below autocast run (CPU, CUDA...).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from autocast_spec.model import Policy, Spec

from .policy import ArgCast, AutocastState, CastPlan, decide
from .signatures import Path, signature
from .torch_registry import op_overload


class BannedOpError(RuntimeError):
    """An op the device spec bans under autocast was called (the spec's message)."""


def _autocast_keys() -> torch._C.DispatchKeySet:
    keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
    for name in dir(torch._C.DispatchKey):
        if name.startswith("Autocast"):
            keys = keys.add(getattr(torch._C.DispatchKey, name))
    return keys


AUTOCAST_KEYS = _autocast_keys()


@contextlib.contextmanager
def autocast_excluded() -> Iterator[None]:
    """Run the body with every Autocast dispatch key excluded (this thread)."""
    with torch._C._ExcludeDispatchKeyGuard(AUTOCAST_KEYS):
        yield


def _get(args: list[Any], kwargs: dict[str, Any], path: Path) -> Any:
    where, key, *rest = path
    value = args[key] if where == "args" else kwargs[key]  # type: ignore[index]
    for k in rest:
        value = value[k]
    return value


def _set(args: list[Any], kwargs: dict[str, Any], path: Path, new: Any) -> None:
    where, key, *rest = path
    if not rest:
        if where == "args":
            args[key] = new  # type: ignore[index]
        else:
            kwargs[key] = new  # type: ignore[index]
        return
    container = args[key] if where == "args" else kwargs[key]  # type: ignore[index]
    copy = list(container)
    inner: Any = copy
    for k in rest[:-1]:
        inner[k] = list(inner[k])
        inner = inner[k]
    inner[rest[-1]] = new
    _set(args, kwargs, (where, key), copy)


def bind_all(op: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Positional arguments filled up to the last positional slot (defaults included)."""
    out_args: list[Any] = []
    out_kwargs: dict[str, Any] = {}
    for slot in signature(op).slots:
        if not slot.kwarg_only and slot.index < len(args):
            value = args[slot.index]
        elif slot.name in kwargs:
            value = kwargs[slot.name]
        elif slot.has_default:
            value = slot.default
        else:
            raise TypeError(f"{op}: missing argument {slot.name!r}")
        if slot.kwarg_only:
            out_kwargs[slot.name] = value
        else:
            out_args.append(value)
    return out_args, out_kwargs


CastFn = Callable[[ArgCast, torch.Tensor], torch.Tensor]
"""How one planned cast is made: ``(cast, source) -> the tensor passed on``."""


# Tensor.bfloat16() is Tensor.to(torch.bfloat16) without parsing to()'s overloads.
_TO = {
    torch.bfloat16: torch.Tensor.bfloat16,
    torch.float16: torch.Tensor.half,
    torch.float32: torch.Tensor.float,
    torch.float64: torch.Tensor.double,
}


def caster(dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function :func:`to_dtype` calls for a cast to ``dtype`` (``Tensor.bfloat16``...)."""
    to = _TO.get(dtype)
    return to if to is not None else lambda src: src.to(dtype)


def to_dtype(cast: ArgCast, src: torch.Tensor) -> torch.Tensor:
    """The plain cast: ``Tensor.to``, the same ``_to_copy`` native autocast makes."""
    to = _TO.get(cast.to_dtype)
    return to(src) if to is not None else src.to(cast.to_dtype)


def apply_plan(
    plan: CastPlan, args: Sequence[Any], kwargs: Mapping[str, Any], cast: CastFn = to_dtype
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments ``plan.target_op`` is called with; raises for refused calls.

    Each of the plan's casts is made by ``cast`` (default :func:`to_dtype`); the
    reference autocast passes one that serves weights from its cache and traces.
    Then the dtype argument is set or appended as the plan says.
    """
    if plan.raises is not None:
        if plan.policy is Policy.BANNED:
            raise BannedOpError(plan.raises)
        raise RuntimeError(plan.raises)
    a = list(args)
    k = dict(kwargs)
    for c in plan.casts:
        path = c.path
        if len(path) == 2 and path[0] == "args":  # the common case, without the path walk
            i: int = path[1]  # type: ignore[assignment]
            a[i] = cast(c, a[i])
        else:
            _set(a, k, path, cast(c, _get(a, k, path)))
    if plan.append_target is not None:
        a, k = bind_all(plan.op, a, k)
    if plan.set_dtype is not None:
        for path in plan.dtype_paths:
            if path[0] == "kwargs":
                k[str(path[1])] = plan.set_dtype
            else:
                _set(a, k, path, plan.set_dtype)
    return tuple(a), k


def oracle_plan(
    spec: Spec, state: AutocastState, op: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> CastPlan:
    return decide(spec.device(state.device), spec.rules, state, op, args, kwargs, spec.op_info(op))


def oracle_apply(plan: CastPlan, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """Apply ``plan`` to the call's arguments and call its target below every Autocast key."""
    with autocast_excluded():
        a, k = apply_plan(plan, args, kwargs)
        return op_overload(plan.target_op)(*a, **k)


def oracle_call(
    spec: Spec, state: AutocastState, op: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Any:
    """What autocast should produce for ``op(*args, **kwargs)``: decide, apply, call below autocast."""
    return oracle_apply(oracle_plan(spec, state, op, args, kwargs), args, kwargs)

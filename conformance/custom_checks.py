"""custom_fwd / custom_bwd and custom ops: run one combination, and say what the spec expects.

Expectations come from the spec's eligibility rules (``rules.eligibility``: what
``cast_inputs`` and a custom op's ``register_autocast`` cast) and from the
documented ``torch.amp`` semantics: ``cast_inputs`` casts eligible inputs and runs
the forward with autocast disabled; ``custom_bwd`` runs backward in the forward's
autocast state (enabled only when the forward ran under autocast without
``cast_inputs``, with the forward's dtype).
"""

from __future__ import annotations

import contextlib
import itertools
import types
from dataclasses import dataclass, field
from typing import Any

import torch

from reference_impl.dtypes import dtype_name, dtype_of
from reference_impl.runtime import quiet

from .cases import Case, other_device
from .target import Target


@dataclass
class Combination:
    steps: tuple[str, ...]
    rule: str
    expected: dict[str, Any] = field(default_factory=dict)
    observed: dict[str, Any] = field(default_factory=dict)


def eligible(target: Target, t: torch.Tensor) -> bool:
    """rules.eligibility for a tensor meeting autocast on the target's device."""
    r = target.spec.rules.eligibility
    if r.floating_only and not t.is_floating_point():
        return False
    if dtype_name(t.dtype) in r.never_cast:
        return False
    return not (r.same_device_only and t.device.type != target.device)


def _cast_dtype(cast: str, lower: str) -> torch.dtype | None:
    return None if cast == "none" else dtype_of(lower if cast == "lower" else cast)


def _input(target: Target, kind: str, lower: str) -> torch.Tensor:
    if kind == "int64":
        return torch.arange(4, device=target.device)
    if kind == "other_device":
        return torch.ones(4, device=other_device(target.device), requires_grad=True)
    # a keyword input in the half type that is not the autocast dtype: every cast_inputs changes it
    other_half = "float16" if lower == "bfloat16" else "bfloat16"
    dt = dtype_of(other_half if kind == "kwarg" else kind)
    return torch.ones(4, dtype=dt, device=target.device, requires_grad=True)


def _state(device: str) -> tuple[bool, str]:
    return torch.is_autocast_enabled(device), dtype_name(torch.get_autocast_dtype(device))


def scaled(device: str, cast: torch.dtype | None, log: dict[str, Any], inner: Any = None) -> Any:
    """An autograd.Function with custom_fwd(cast_inputs=cast)/custom_bwd that logs what it sees."""

    class Scale(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type=device, cast_inputs=cast)
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            log["fwd_input"] = dtype_name(x.dtype)
            log["fwd_state"] = _state(device)
            return (inner.apply(x) if inner is not None else x) * 2

        @staticmethod
        @torch.amp.custom_bwd(device_type=device)
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            log["bwd_state"] = _state(device)
            return g * 2

    return Scale


def custom_function_combination(target: Target, case: Case) -> Combination:
    if case.kind.startswith("nested-"):
        return _nested(target, case)
    where, cast_s, kind = case.kind.split("-")
    cast = _cast_dtype(cast_s.removeprefix("cast_"), case.dtype)
    d, lower = target.device, case.dtype
    inside = where == "inside"
    log: dict[str, Any] = {}
    fn = scaled(d, cast, log)
    with target.tensors():
        x = _input(target, kind, lower)
    default = target.device_spec.default_dtype
    fwd_dtype = lower if inside else dtype_name(torch.get_autocast_dtype(d))
    used = inside and cast is None
    cast_here = inside and cast is not None and eligible(target, x)
    exp: dict[str, Any] = {
        "fwd_input": dtype_name(cast) if cast_here and cast is not None else dtype_name(x.dtype),
        "fwd_state": (used, fwd_dtype),
    }
    with quiet():
        region = target.autocast_impl(d, dtype=dtype_of(lower)) if inside else contextlib.nullcontext()
        with region:
            if kind == "kwarg":  # custom_fwd's keyword path: the decorated forward called directly
                fn.forward(types.SimpleNamespace(), x=x)
            else:
                y = fn.apply(x)
        if kind != "kwarg" and x.requires_grad:
            y.float().sum().backward()
            exp["bwd_state"] = (used, fwd_dtype)
            exp["grad"] = dtype_name(x.dtype)
            log["grad"] = dtype_name(x.grad.dtype) if x.grad is not None else None
    steps = (
        f"class F(torch.autograd.Function) with @torch.amp.custom_fwd(device_type={d!r}, cast_inputs={cast}) "
        f"forward(ctx, x) and @torch.amp.custom_bwd backward",
        ("inside" if inside else "outside")
        + f" torch.autocast({d!r}, dtype=torch.{lower}): "
        + ("F.forward(ctx, x=x)" if kind == "kwarg" else "y = F.apply(x)"),
        f"x: {dtype_name(x.dtype)}[4] on {x.device.type}; backward outside (default dtype {default})",
    )
    rule = "cast_inputs casts eligible inputs (rules.eligibility) and disables autocast in forward; "
    rule += "custom_bwd runs backward in the forward's state"
    return Combination(steps, rule, exp, {k: log.get(k) for k in exp})


def _nested(target: Target, case: Case) -> Combination:
    """An outer custom function whose forward applies an inner one, inside a region."""
    _, o, i = case.kind.split("-")
    d, lower = target.device, case.dtype
    oc, ic = _cast_dtype(o.removeprefix("outer_"), lower), _cast_dtype(i.removeprefix("inner_"), lower)
    olog: dict[str, Any] = {}
    ilog: dict[str, Any] = {}
    fn = scaled(d, oc, olog, inner=scaled(d, ic, ilog))
    with target.tensors():
        x = torch.ones(4, device=d, requires_grad=True)
    with quiet():
        with target.autocast_impl(d, dtype=dtype_of(lower)):
            y = fn.apply(x)
        y.float().sum().backward()
    outer_on = oc is None
    outer_in = dtype_name(oc) if oc is not None else "float32"
    inner_in = dtype_name(ic) if outer_on and ic is not None else outer_in
    inner_on = outer_on and ic is None
    exp = {
        "outer_fwd": (outer_in, (outer_on, lower)),
        "inner_fwd": (inner_in, (inner_on, lower)),
        "outer_bwd": (outer_on, lower),
        "inner_bwd": None,  # a Function's forward runs without grad: the inner one is not recorded
        "grad": "float32",
    }
    obs = {
        "outer_fwd": (olog.get("fwd_input"), olog.get("fwd_state")),
        "inner_fwd": (ilog.get("fwd_input"), ilog.get("fwd_state")),
        "outer_bwd": olog.get("bwd_state"),
        "inner_bwd": ilog.get("bwd_state"),
        "grad": dtype_name(x.grad.dtype) if x.grad is not None else None,
    }
    steps = (
        f"Outer: custom_fwd(cast_inputs={oc}); its forward applies Inner: custom_fwd(cast_inputs={ic})",
        f"with torch.autocast({d!r}, dtype=torch.{lower}): y = Outer.apply(float32 x); backward outside",
        "inner_bwd: None, as Outer's forward runs without grad (Inner is not recorded)",
    )
    rule = "a custom function inside another's forward sees the state the outer one set"
    return Combination(steps, rule, exp, obs)


# ---------------------------------------------------------------------------
# Custom ops: torch.library.custom_op + torch.library.register_autocast
# ---------------------------------------------------------------------------

NAMESPACE = "autocast_conformance"
_OPS: dict[tuple[str, str], Any] = {}
_SEEN: list[str] = []
_COUNTER = itertools.count()


def custom_op_for(device: str, cast: torch.dtype) -> Any:
    """A custom op (one per device type and cast dtype) that records the dtype it receives."""
    key = (device, dtype_name(cast))
    if key not in _OPS:
        name = f"{NAMESPACE}::record_{device}_{dtype_name(cast)}_{next(_COUNTER)}"

        @torch.library.custom_op(name, mutates_args=())
        def record(x: torch.Tensor) -> torch.Tensor:
            _SEEN.append(dtype_name(x.dtype))
            return x.clone()

        @record.register_fake
        def _(x: torch.Tensor) -> torch.Tensor:
            _SEEN.append(dtype_name(x.dtype))
            return torch.empty_like(x)

        torch.library.register_autocast(name, device, cast)
        _OPS[key] = record
    return _OPS[key]


def custom_op_combination(target: Target, case: Case) -> Combination:
    cast_s, kind = case.kind.split("-")
    d, lower = target.device, case.dtype
    cast = _cast_dtype(cast_s.removeprefix("cast_"), lower)
    assert cast is not None
    op = custom_op_for(d, cast)
    with target.tensors(other_device(d) if kind == "other_device" else None):
        dt = {"lower": dtype_of(lower), "float64": torch.float64, "int64": torch.int64}.get(
            kind, torch.float32
        )
        dev = other_device(d) if kind == "other_device" else d
        x = torch.ones(4, dtype=dt, device=dev)
        enabled = kind != "disabled"
        del _SEEN[:]
        with quiet(), target.autocast(dtype_of(lower), enabled):
            op(x)
    want = dtype_name(cast) if enabled and eligible(target, x) else dtype_name(x.dtype)
    steps = (
        f"@torch.library.custom_op; torch.library.register_autocast(op, {d!r}, torch.{dtype_name(cast)})",
        f"with torch.autocast({d!r}, dtype=torch.{lower}, enabled={enabled}): "
        f"op(x) with x {dtype_name(x.dtype)}[4] on {x.device.type}",
        "expected/observed: the dtype the op's implementation receives",
    )
    rule = "a registered custom op casts exactly the inputs rules.eligibility makes eligible"
    return Combination(steps, rule, {"received": want}, {"received": _SEEN[0] if _SEEN else None})

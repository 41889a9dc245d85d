"""custom_function: ``torch.amp.custom_fwd`` / ``custom_bwd``.

Cases, per dtype under test: every combination of where the function is applied (inside
or outside a region), its ``cast_inputs`` (unset, float32, the autocast dtype) and its
input (float16, bfloat16, float32, float64, int64, on another device, or given as a
keyword to the decorated forward); and custom functions nested in one another (each
``cast_inputs`` of the outer x each of the inner).

Procedure: an ``autograd.Function`` whose decorated forward and backward log the dtype
they receive and the autocast state they run in; backward runs outside the region.

Expectation, from the spec's eligibility rules (``rules.eligibility``: what
``cast_inputs`` casts) and the documented ``torch.amp`` semantics: ``cast_inputs`` casts
eligible inputs and runs the forward with autocast disabled; ``custom_bwd`` runs backward
in the forward's state (enabled only when the forward ran under autocast without
``cast_inputs``, with the forward's dtype); a function applied inside another's forward
sees the state the outer one set.
"""

from __future__ import annotations

import contextlib
import enum
import types
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.engine.eligibility import eligibility
from reference_impl.harness.state import quiet

from ..kit.case import Case, shown
from ..kit.category import Category
from ..kit.refusal import require_autocast
from ..kit.state import autocast_fields
from ..kit.verdict import Observation
from ..target import Target
from .eligibility import other_device

COMBINATION = "custom_function.combination"


class CastInputs(enum.Enum):
    NONE = "none"
    FLOAT32 = "float32"
    LOWER = "lower"

    def dtype(self, lower: str) -> torch.dtype | None:
        return (
            None if self is CastInputs.NONE else dtype_of(lower if self is CastInputs.LOWER else self.value)
        )


INPUTS = ("float16", "bfloat16", "float32", "float64", "int64", "other_device", "kwarg")


@dataclass(frozen=True)
class Applied:
    """One function applied inside or outside a region, with its cast_inputs, on one input."""

    inside: bool = shown("inside", "outside")
    cast: CastInputs = CastInputs.NONE
    input: str = "float32"  # one of INPUTS
    ID: ClassVar[str] = "{inside}-cast_{cast}-{input}"


@dataclass(frozen=True)
class Nested:
    """An outer function whose forward applies an inner one, inside a region."""

    outer: CastInputs
    inner: CastInputs
    ID: ClassVar[str] = "nested-outer_{outer}-inner_{inner}"


def cases(target: Target) -> list[Case[Applied | Nested]]:
    out: list[Case[Applied | Nested]] = []
    for dtype in target.dtypes:
        out += [
            Case("custom_function", target.device, dtype, params=Applied(inside, cast, inp))
            for inside in (True, False)
            for cast in CastInputs
            for inp in INPUTS
        ]
        out += [
            Case("custom_function", target.device, dtype, params=Nested(o, i))
            for o in CastInputs
            for i in CastInputs
        ]
    return out


CATEGORY = Category("custom_function", __doc__, checks=(COMBINATION,), generators=(cases,))


def _state(device: str) -> tuple[bool, str]:
    now = autocast_fields(device)
    return now.enabled, now.dtype


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


def _input(target: Target, kind: str, lower: str) -> torch.Tensor:
    if kind == "int64":
        return torch.arange(4, device=target.device)
    if kind == "other_device":
        return torch.ones(4, device=other_device(target.device), requires_grad=True)
    # a keyword input in the half type that is not the autocast dtype: every cast_inputs changes it
    other_half = "float16" if lower == "bfloat16" else "bfloat16"
    dt = dtype_of(other_half if kind == "kwarg" else kind)
    return torch.ones(4, dtype=dt, device=target.device, requires_grad=True)


def combination(target: Target, case: Case[Applied | Nested]) -> Observation:
    assert case.dtype is not None
    require_autocast(target, case.dtype)
    if isinstance(case.params, Nested):
        return _nested(target, case, case.params)
    v = case.params
    assert isinstance(v, Applied)
    d, lower = target.device, case.dtype_text
    cast = v.cast.dtype(lower)
    log: dict[str, Any] = {}
    fn = scaled(d, cast, log)
    with target.tensors():
        x = _input(target, v.input, lower)
    default = target.device_spec.default_dtype
    fwd_dtype = lower if v.inside else dtype_name(torch.get_autocast_dtype(d))
    used = v.inside and cast is None
    cast_here = v.inside and cast is not None and eligibility(target.spec.rules, d)(x)
    exp: dict[str, Any] = {
        "fwd_input": dtype_name(cast) if cast_here and cast is not None else dtype_name(x.dtype),
        "fwd_state": (used, fwd_dtype),
    }
    kwarg = v.input == "kwarg"
    with quiet():
        region = target.autocast_impl(d, dtype=case.dtype) if v.inside else contextlib.nullcontext()
        with region:
            if kwarg:  # custom_fwd's keyword path: the decorated forward called directly
                fn.forward(types.SimpleNamespace(), x=x)
            else:
                y = fn.apply(x)
        if not kwarg and x.requires_grad:
            y.float().sum().backward()
            exp["bwd_state"] = (used, fwd_dtype)
            exp["grad"] = dtype_name(x.dtype)
            log["grad"] = dtype_name(x.grad.dtype) if x.grad is not None else None
    steps = (
        f"class F(torch.autograd.Function) with @torch.amp.custom_fwd(device_type={d!r}, cast_inputs={cast}) "
        f"forward(ctx, x) and @torch.amp.custom_bwd backward",
        ("inside" if v.inside else "outside")
        + f" torch.autocast({d!r}, dtype=torch.{lower}): "
        + ("F.forward(ctx, x=x)" if kwarg else "y = F.apply(x)"),
        f"x: {dtype_name(x.dtype)}[4] on {x.device.type}; backward outside (default dtype {default})",
    )
    rule = "cast_inputs casts eligible inputs (rules.eligibility) and disables autocast in forward; "
    rule += "custom_bwd runs backward in the forward's state"
    return Observation(
        case,
        COMBINATION,
        "custom_fwd/custom_bwd differ from the spec",
        exp,
        {k: log.get(k) for k in exp},
        facts={"rule": rule},
        steps=steps,
    )


def _nested(target: Target, case: Case[Applied | Nested], v: Nested) -> Observation:
    d, lower = target.device, case.dtype_text
    oc, ic = v.outer.dtype(lower), v.inner.dtype(lower)
    olog: dict[str, Any] = {}
    ilog: dict[str, Any] = {}
    fn = scaled(d, oc, olog, inner=scaled(d, ic, ilog))
    with target.tensors():
        x = torch.ones(4, device=d, requires_grad=True)
    with quiet():
        with target.autocast_impl(d, dtype=case.dtype):
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
    return Observation(
        case,
        COMBINATION,
        "custom_fwd/custom_bwd differ from the spec",
        exp,
        obs,
        facts={"rule": rule},
        steps=steps,
    )

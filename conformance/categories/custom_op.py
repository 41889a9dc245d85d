"""custom_op: ``torch.library.custom_op`` with ``register_autocast`` follows the eligibility rules.

Cases, per dtype under test, on the device types ``rules.custom_ops`` names: a custom op
registered to cast to float32 and one to the autocast dtype, each called with float32,
lower, float64 and int64 tensors, a tensor of another device type, and with autocast
disabled.

Procedure: the op records the dtype its implementation receives.
Expectation: the registered cast dtype exactly when autocast is on and the input is
eligible (``rules.eligibility``), else the input's own dtype.
"""

from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from reference_impl.engine.dtypes import dtype_name
from reference_impl.engine.eligibility import eligibility
from reference_impl.harness.state import quiet

from ..kit.case import Case
from ..kit.category import Category
from ..kit.verdict import Observation
from ..target import Target
from .eligibility import other_device

COMBINATION = "custom_op.combination"


class CastTo(enum.Enum):
    FLOAT32 = "float32"
    LOWER = "lower"


class Given(enum.Enum):
    FLOAT32 = "float32"
    LOWER = "lower"
    FLOAT64 = "float64"
    INT64 = "int64"
    OTHER_DEVICE = "other_device"
    DISABLED = "disabled"  # float32, with autocast disabled


@dataclass(frozen=True)
class Registered:
    cast: CastTo
    given: Given
    ID: ClassVar[str] = "cast_{cast}-{given}"


def cases(target: Target) -> list[Case[Registered]]:
    if target.device not in target.spec.rules.custom_ops.register_autocast_devices:
        return []
    return [
        Case("custom_op", target.device, dtype, params=Registered(cast, given))
        for dtype in target.dtypes
        for cast in CastTo
        for given in Given
    ]


CATEGORY = Category(
    "custom_op",
    __doc__,
    checks=(COMBINATION,),
    generators=(cases,),
)

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


def combination(target: Target, case: Case[Registered]) -> Observation:
    v, lower = case.params, case.dtype
    assert v is not None and lower is not None
    d = target.device
    cast = lower if v.cast is CastTo.LOWER else torch.float32
    op = custom_op_for(d, cast)
    elsewhere = v.given is Given.OTHER_DEVICE
    with target.tensors(other_device(d) if elsewhere else None):
        dt = {Given.LOWER: lower, Given.FLOAT64: torch.float64, Given.INT64: torch.int64}.get(
            v.given, torch.float32
        )
        x = torch.ones(4, dtype=dt, device=other_device(d) if elsewhere else d)
        enabled = v.given is not Given.DISABLED
        del _SEEN[:]
        with quiet(), target.autocast(lower, enabled):
            op(x)
    want = dtype_name(cast) if enabled and eligibility(target.spec.rules, d)(x) else dtype_name(x.dtype)
    steps = (
        f"@torch.library.custom_op; torch.library.register_autocast(op, {d!r}, torch.{dtype_name(cast)})",
        f"with torch.autocast({d!r}, dtype={lower}, enabled={enabled}): "
        f"op(x) with x {dtype_name(x.dtype)}[4] on {x.device.type}",
        "expected/observed: the dtype the op's implementation receives",
    )
    rule = "a registered custom op casts exactly the inputs rules.eligibility makes eligible"
    return Observation(
        case,
        COMBINATION,
        "a custom op's autocast differs from the spec",
        {"received": want},
        {"received": _SEEN[0] if _SEEN else None},
        facts={"rule": rule},
        steps=steps,
    )

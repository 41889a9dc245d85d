"""Op schemas as the policy engine reads them: which argument slots hold tensors or dtypes.

:func:`signature` reads the installed torch's schema for a dispatcher op once (cached);
:func:`slot_value` finds where a call passed a slot's value (positionally or by keyword).
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .torch_registry import op_overload

Path = tuple[str | int, ...]  # where a value sits in a call: ("args", 0), ("kwargs", "dtype"), ...


class SlotKind(enum.Enum):
    TENSOR = "Tensor"
    OPTIONAL_TENSOR = "Tensor?"
    TENSOR_LIST = "Tensor[]"
    OPTIONAL_DTYPE = "ScalarType?"
    DTYPE = "ScalarType"
    OTHER = "other"


_KINDS = {
    "Tensor": SlotKind.TENSOR,
    "Optional[Tensor]": SlotKind.OPTIONAL_TENSOR,
    "List[Tensor]": SlotKind.TENSOR_LIST,
    "Optional[ScalarType]": SlotKind.OPTIONAL_DTYPE,
    "ScalarType": SlotKind.DTYPE,
}


@dataclass(frozen=True)
class Slot:
    index: int
    name: str
    kind: SlotKind
    kwarg_only: bool
    has_default: bool
    default: Any


@dataclass(frozen=True)
class OpSignature:
    op: str
    slots: tuple[Slot, ...]
    mutable: bool

    @property
    def tensor_slots(self) -> tuple[Slot, ...]:
        keep = (SlotKind.TENSOR, SlotKind.OPTIONAL_TENSOR, SlotKind.TENSOR_LIST)
        return tuple(s for s in self.slots if s.kind in keep)

    @property
    def optional_dtype_slots(self) -> tuple[Slot, ...]:
        return tuple(s for s in self.slots if s.kind is SlotKind.OPTIONAL_DTYPE)


@functools.cache
def signature(op: str) -> OpSignature:
    """The argument slots of a dispatcher op, from the installed torch's schema."""
    schema = op_overload(op)._schema
    slots = tuple(
        Slot(
            index=i,
            name=a.name,
            kind=_KINDS.get(str(a.real_type), SlotKind.OTHER),
            kwarg_only=a.kwarg_only,
            has_default=a.has_default_value(),
            default=a.default_value if a.has_default_value() else None,
        )
        for i, a in enumerate(schema.arguments)
    )
    return OpSignature(op=op, slots=slots, mutable=bool(schema.is_mutable))


def slot_value(slot: Slot, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Path | None, Any]:
    """Where a slot's value was passed, and the value (``None`` path: not passed)."""
    if not slot.kwarg_only and slot.index < len(args):
        return ("args", slot.index), args[slot.index]
    if slot.name in kwargs:
        return ("kwargs", slot.name), kwargs[slot.name]
    return None, None

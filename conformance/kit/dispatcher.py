"""What the installed torch's dispatcher says about ops, for case generation.

The categories' generators read the spec and ask these questions of the installed
torch: whether an in-place or ``out=`` variant takes the op's arguments, whether an op
has an optional dtype argument, whether a call can be synthesized from the schema, and
which ops without an Autocast kernel make up the stable registry sample. Same torch,
same answers: the cases come out the same in every pytest-xdist worker.
"""

from __future__ import annotations

import functools
import hashlib

import torch

from reference_impl.engine.signatures import SlotKind, signature
from reference_impl.engine.torch_registry import (
    all_op_names,
    autocast_registrations,
    op_schema,
    split_op_name,
)
from reference_impl.harness.calls import synthesize_call

REGISTRY_SAMPLE_MODULUS = 40


def same_arguments(op: str, variant: str) -> bool:
    """``variant`` takes the same argument types as ``op`` (``pow_.Scalar`` is not ``pow.Scalar``'s)."""

    def types(name: str) -> list[str]:
        return [str(a.type) for a in op_schema(name).arguments]

    return types(op) == types(variant)


def takes_arguments_of(op: str, out: str) -> bool:
    """The ``out=`` variant ``out`` takes ``op``'s arguments (``mean.out`` needs a ``dim`` ``mean`` lacks)."""
    ours = [str(a.type) for a in op_schema(op).arguments]
    return ours == [str(a.type) for a in op_schema(out).arguments if not a.is_out]


def has_optional_dtype(op: str) -> bool:
    try:
        return any(s.kind is SlotKind.OPTIONAL_DTYPE for s in signature(op).slots)
    except Exception:
        return False


def synthesizable(op: str) -> bool:
    """The schema takes at least one tensor and every required argument can be synthesized."""
    try:
        sig = signature(op)
        if sig.mutable or not sig.tensor_slots:
            return False
        synthesize_call(op, lambda i: torch.empty(0))
    except Exception:
        return False
    return True


def _stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


@functools.lru_cache(maxsize=8)
def registry_sample(dispatch_key: str, listed: frozenset[str]) -> tuple[str, ...]:
    """A stable sample (by name hash) of aten ops with no Autocast kernel on the device."""
    registered = autocast_registrations(dispatch_key)
    picked = []
    for op in sorted(all_op_names()):
        ns, name, overload = split_op_name(op)
        if ns != "aten" or name.startswith("_") or name.endswith("_") or "out" in overload:
            continue
        if op in listed or op in registered:
            continue
        if _stable_hash(op) % REGISTRY_SAMPLE_MODULUS:
            continue
        if synthesizable(op):
            picked.append(op)
    return tuple(picked)

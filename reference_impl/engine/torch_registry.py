"""What the installed torch knows: its version, its operators, its Autocast kernels."""

from __future__ import annotations

import functools

import torch

from autocast_spec.versions import TorchFacts
from autocast_spec.versions import parse_release as parse_release  # re-exported for the CLI modules


def installed_torch_version() -> str:
    """The installed torch's release, without local tags: ``"2.13.0"``."""
    return ".".join(str(p) for p in parse_release(torch.__version__))


def build_features() -> frozenset[str]:
    """The build features of the installed torch that spec entries' ``build:`` may name."""
    return frozenset({"cudnn"} if torch._C._has_cudnn else set())


@functools.lru_cache(maxsize=1)
def all_op_names() -> frozenset[str]:
    """Every operator overload the dispatcher knows, e.g. ``aten::mm``, ``aten::add.Tensor``."""
    return frozenset(torch._C._dispatch_get_all_op_names())


def installed_torch() -> TorchFacts:
    """The installed torch as the spec loader sees it: release, build features, operator names."""
    return TorchFacts(installed_torch_version(), build_features(), all_op_names())


def op_exists(op: str) -> bool:
    return op in all_op_names()


def autocast_registrations(dispatch_key: str) -> frozenset[str]:
    """The ops with a kernel on ``dispatch_key`` (e.g. ``AutocastCUDA``) in this process."""
    try:
        return frozenset(torch._C._dispatch_get_registrations_for_dispatch_key(dispatch_key))
    except RuntimeError:
        return frozenset()


def dispatch_key(name: str) -> torch._C.DispatchKey:
    """A dispatch key by name, including those the Python enum does not bind (``AutocastMTIA``)."""
    key = torch._C._parse_dispatch_key(name)
    if key is None:
        raise ValueError(f"torch has no dispatch key {name!r}")
    return key


def split_op_name(op: str) -> tuple[str, str, str]:
    """``aten::conv_transpose2d.input`` -> ``("aten", "conv_transpose2d", "input")``."""
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    return ns, name, overload


def op_overload(op: str) -> torch._ops.OpOverload:
    """The callable ``torch.ops`` handle of a dispatcher op name."""
    ns, name, overload = split_op_name(op)
    packet = getattr(getattr(torch.ops, ns), name)
    ov: torch._ops.OpOverload = getattr(packet, overload or "default")
    return ov


def overload_name(overload: torch._ops.OpOverload) -> str:
    """The dispatcher op name of a ``torch.ops`` handle (the inverse of :func:`op_overload`)."""
    name = overload._schema.name
    return name if overload._overloadname == "default" else f"{name}.{overload._overloadname}"


def op_schema(op: str) -> torch._C.FunctionSchema:
    return op_overload(op)._schema


def inplace_variant(op: str) -> str | None:
    """``aten::log`` -> ``aten::log_`` when the registry has it."""
    ns, name, overload = split_op_name(op)
    candidate = f"{ns}::{name}_" + (f".{overload}" if overload else "")
    return candidate if op_exists(candidate) else None


def out_variant(op: str) -> str | None:
    """``aten::log`` -> ``aten::log.out``; ``aten::pow.Tensor_Scalar`` -> ``...Tensor_Scalar_out``."""
    ns, name, overload = split_op_name(op)
    candidates = [f"{ns}::{name}.{overload}_out"] if overload else [f"{ns}::{name}.out"]
    for c in candidates:
        if op_exists(c):
            return c
    return None

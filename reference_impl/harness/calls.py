"""Calls made from an op's schema, and intercepted below Autocast.

Arguments are synthesized for an op's required parameters; a recording kernel at the
Autograd key right below Autocast records the call an Autocast kernel passes down and
raises :class:`Intercepted` before any real kernel runs.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch._dispatch.python import enable_python_dispatcher

from ..engine.torch_registry import op_overload, overload_name, split_op_name
from .samples import output_tensors


class Intercepted(Exception):
    """Raised by the recording kernel so that no real kernel runs."""


@dataclass
class Call:
    op: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def tensors(self) -> list[torch.Tensor]:
        return output_tensors((self.args, list(self.kwargs.values())))

    def float_dtypes(self) -> list[torch.dtype]:
        return [t.dtype for t in self.tensors() if t.is_floating_point()]

    def has_dtype_value(self, dtype: torch.dtype) -> bool:
        values = list(self.args) + list(self.kwargs.values())
        return any(v is dtype for v in values)


_DIMNAME_ARGS = frozenset({"dim", "dims", "names", "outdim"})


def _value_for(arg: torch._C.Argument, make: Callable[[int], torch.Tensor], index: int) -> Any:
    t = str(arg.type)
    optional = t.endswith("?") or t.startswith("Optional[")
    base = t[len("Optional[") : -1] if t.startswith("Optional[") else t.rstrip("?")
    if optional and base not in ("Tensor", "List[Tensor]", "Tensor[]"):
        return None
    if base == "Tensor":
        return make(index)
    if base in ("List[Tensor]", "Tensor[]", "List[Optional[Tensor]]", "Tensor?[]"):
        return [make(index), make(index + 1)]
    if base in ("int", "SymInt"):
        return 1
    if base in ("List[int]", "int[]", "List[SymInt]", "SymInt[]") or base.startswith("List[int]"):
        return [1]
    if base == "float":
        return 1.0
    if base in ("List[float]", "float[]"):
        return [1.0]
    if base == "bool":
        return False
    if base in ("List[bool]", "bool[]") or base.startswith("List[bool]"):
        return [False]
    # Dimname arguments (the named-tensor overloads torch <2.13 registers for autocast)
    # print as str in schemas; the boxed Autocast kernels parse them as qualified symbols.
    dimname = arg.name in _DIMNAME_ARGS
    if base in ("List[str]", "str[]"):
        return ["dimname::N"] if dimname else ["fro"]
    if base == "str" and dimname:
        return "dimname::N"
    if base == "str":
        return "fro"
    if base in ("Scalar", "number"):
        return 1.0
    if base == "ScalarType":
        return torch.float32
    raise TypeError(f"cannot synthesize an argument of type {t}")


def synthesize_call(op: str, make: Callable[[int], torch.Tensor]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional and keyword arguments for the required parameters of ``op``."""
    schema = op_overload(op)._schema
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    tensor_index = 0
    for a in schema.arguments:
        if a.has_default_value():
            continue
        v = _value_for(a, make, tensor_index)
        if isinstance(v, torch.Tensor):
            tensor_index += 1
        elif isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            tensor_index += len(v)
        if a.kwarg_only:
            kwargs[a.name] = v
        else:
            args.append(v)
    return tuple(args), kwargs


def autograd_key_for(dispatch_key: str) -> torch._C.DispatchKey:
    """``AutocastCUDA`` -> ``DispatchKey.AutogradCUDA``: the key right below Autocast."""
    suffix = dispatch_key.removeprefix("Autocast")
    key: torch._C.DispatchKey = getattr(torch._C.DispatchKey, "Autograd" + suffix)
    return key


@contextlib.contextmanager
def intercept(op: str, autograd_key: torch._C.DispatchKey) -> Iterator[list[Call]]:
    """Record (and stop) every call to any overload of ``op``'s name below Autocast.

    The recording kernels are Python-dispatcher kernels keyed by the enum (some
    keys, such as AutogradMTIA, have no string name that ``torch.library``
    accepts), installed only while the block runs.
    """
    ns, name, _ = split_op_name(op)
    packet = getattr(getattr(torch.ops, ns), name)
    overloads = [getattr(packet, ov) for ov in packet.overloads()]
    calls: list[Call] = []

    def recorder(overload: torch._ops.OpOverload) -> Callable[..., Any]:
        qualified = overload_name(overload)

        def kernel(*args: Any, **kwargs: Any) -> Any:
            calls.append(Call(qualified, args, dict(kwargs)))
            raise Intercepted(qualified)

        return kernel

    saved = {ov: ov.py_kernels.get(autograd_key) for ov in overloads}
    try:
        for ov in overloads:
            ov.py_kernels[autograd_key] = recorder(ov)
            ov._dispatch_cache.clear()
        with enable_python_dispatcher():
            yield calls
    finally:
        for ov, prev in saved.items():
            if prev is None:
                ov.py_kernels.pop(autograd_key, None)
            else:
                ov.py_kernels[autograd_key] = prev
            ov._dispatch_cache.clear()


@contextlib.contextmanager
def intercept_registered(op: str, autograd_key: torch._C.DispatchKey) -> Iterator[list[Call]]:
    """Like :func:`intercept`, for overload ``op`` alone, with a kernel registered through
    ``torch.library`` (seen by the C++ dispatcher): a call the Python dispatcher never sees at
    that key (a backend's own kernel beside a CompositeImplicitAutograd one: Google's torch-tpu's
    avg_pool1d) still arrives there. Registered only while the block runs."""
    ns, name, overload = split_op_name(op)
    calls: list[Call] = []

    def kernel(*args: Any, **kwargs: Any) -> Any:
        calls.append(Call(op, args, dict(kwargs)))
        raise Intercepted(op)

    lib = torch.library.Library(ns, "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
            lib.impl(f"{name}.{overload}" if overload else name, kernel, autograd_key.name)
        yield calls
    finally:
        lib._destroy()


def call_intercepted(
    op: str, autograd_key: torch._C.DispatchKey, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Call | None, str | None]:
    """Run ``op``; return the intercepted call, or the error raised before it."""
    with intercept(op, autograd_key) as calls:
        try:
            op_overload(op)(*args, **kwargs)
        except Intercepted:
            pass
        except Exception as e:
            if not calls:
                return None, f"{type(e).__name__}: {e}"
    return (calls[0] if calls else None), None

"""Turn the spec's declarative sample arguments into real tensors and calls.

Floating tensors declared with ``dtype: float`` (the default) take the dtype the
caller asks for (``float_dtype``); explicit dtypes (``int64``, ``bool``,
``float64``...) are kept. Values are drawn from a seeded CPU generator and
moved to the target device, so a sample is the same on every device.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._guards import detect_fake_mode

from autocast_spec.catalog import Arg, DtypeArg, EntryPoint, ListArg, Literal, Sample, TensorArg

from ..engine.dtypes import dtype_of
from ..engine.torch_registry import op_overload

__all__ = [
    "Materialized",
    "call",
    "entry_point_sample",
    "first_tensor",
    "is_operator",
    "make_tensor",
    "materialize",
    "output_tensors",
    "resolve",
    "resolve_entry_point",
]


def _values(arg: TensorArg, gen: torch.Generator) -> torch.Tensor:
    shape = arg.shape
    domain = arg.domain
    if domain.startswith("index:"):
        high = int(domain.split(":", 1)[1])
        return torch.randint(0, max(high, 1), shape, generator=gen, dtype=torch.int64)
    if domain == "binary":
        return torch.randint(0, 2, shape, generator=gen).to(torch.float32)
    if domain == "ones":
        return torch.ones(shape)
    if domain == "spd":
        n = shape[-1]
        a = torch.randn(*shape, generator=gen)
        eye = torch.eye(n).expand(shape)
        return a @ a.transpose(-1, -2) / n + eye
    u = torch.rand(shape, generator=gen)
    if domain == "positive":
        return u + 0.5
    if domain == "nonneg":
        return u
    if domain == "unit":
        return u * 1.8 - 0.9
    if domain == "probability":
        return u * 0.9 + 0.05
    if domain == "small":
        return u * 0.2 - 0.1
    return torch.randn(shape, generator=gen)


def make_tensor(arg: TensorArg, float_dtype: torch.dtype, device: str, gen: torch.Generator) -> torch.Tensor:
    dtype = float_dtype if arg.is_test_float else dtype_of(arg.dtype)
    if detect_fake_mode() is not None:
        # Under a FakeTensorMode tensors carry no values (drawing them costs a fake random
        # kernel each), and a CPU-only build cannot move one to an absent device: make the
        # fake tensor on that device directly.
        t = torch.empty(arg.shape, dtype=dtype, device=device)
    else:
        t = _values(arg, gen).to(dtype).to(device)
    if arg.requires_grad and (t.is_floating_point() or t.is_complex()):
        t.requires_grad_(True)
    return t


@dataclass(frozen=True)
class Materialized:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    def tensors(self) -> list[torch.Tensor]:
        return output_tensors((self.args, list(self.kwargs.values())))

    def tensor_paths(self) -> list[tuple[tuple[Any, ...], torch.Tensor]]:
        """Each tensor with its path (``("args", 0)``, ``("args", 1, 2)``, ``("kwargs", "weight")``:
        the paths of the policy engine's cast plan), in argument order."""
        out: list[tuple[tuple[Any, ...], torch.Tensor]] = []

        def walk(path: tuple[Any, ...], v: Any) -> None:
            if isinstance(v, torch.Tensor):
                out.append((path, v))
            elif isinstance(v, (list, tuple)):
                for j, x in enumerate(v):
                    walk((*path, j), x)

        for i, a in enumerate(self.args):
            walk(("args", i), a)
        for k, v in self.kwargs.items():
            walk(("kwargs", k), v)
        return out


def _build(arg: Arg, float_dtype: torch.dtype, device: str, gen: torch.Generator) -> Any:
    if isinstance(arg, TensorArg):
        return make_tensor(arg, float_dtype, device, gen)
    if isinstance(arg, ListArg):
        return [_build(a, float_dtype, device, gen) for a in arg.items]
    if isinstance(arg, DtypeArg):
        return dtype_of(arg.name)
    assert isinstance(arg, Literal)
    return arg.value


def materialize(sample: Sample, float_dtype: torch.dtype, device: str = "cpu", seed: int = 0) -> Materialized:
    gen = torch.Generator().manual_seed(seed)
    args = tuple(_build(a, float_dtype, device, gen) for a in sample.args)
    kwargs = {k: _build(v, float_dtype, device, gen) for k, v in sample.kwargs.items()}
    return Materialized(args, kwargs)


def resolve_entry_point(name: str) -> Callable[..., Any]:
    """``torch.nn.functional.linear`` -> the function; ``Tensor.mm`` -> a method caller."""
    if name.startswith("Tensor."):
        method = name.split(".", 1)[1]
        if not hasattr(torch.Tensor, method):
            raise AttributeError(f"torch.Tensor has no method {method!r}")
        caller = operator.methodcaller
        return lambda self, *a, **k: caller(method, *a, **k)(self)
    obj: Any = torch
    for part in name.split(".")[1:]:
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{name} is not callable")
    return obj  # type: ignore[no-any-return,unused-ignore]


def is_operator(name: str) -> bool:
    """Whether ``name`` is an operator (``aten::mm``, ``aten::add.Tensor``, a vendor's own
    ``torch_ipex::nms``) rather than a public entry point (``torch.mm``, ``Tensor.mm``)."""
    return "::" in name


def resolve(name: str) -> Callable[..., Any]:
    """The one rule for a callable the spec names: an operator's overload, else a public entry point."""
    return op_overload(name) if is_operator(name) else resolve_entry_point(name)


def call(name: str, m: Materialized) -> Any:
    """Call what ``name`` resolves to (:func:`resolve`) with ``m``'s arguments."""
    return resolve(name)(*m.args, **m.kwargs)


def entry_point_sample(ep: EntryPoint, op_samples: tuple[Sample, ...]) -> Sample:
    return ep.sample if ep.sample is not None else op_samples[0]


def first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor in an op's output (ops may return tuples)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (list, tuple)):
        for v in value:
            t = first_tensor(v)
            if t is not None:
                return t
    return None


def output_tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor in ``value``, depth first through lists and tuples."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in output_tensors(v)]
    return []

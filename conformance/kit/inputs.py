"""Making a case's inputs: a sample of the op catalog, with an input mix, on a device.

Call inside ``target.tensors(device)``: tensors are real on present devices and
FakeTensors in policy-only runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from autocast_spec.catalog import ListArg, Sample, TensorArg
from reference_impl.harness.samples import Materialized, materialize

from .case import Mix, MixRole

# The other lower dtype (MixRole.FOREIGN): float16 under bfloat16 autocast and the reverse.
FOREIGN = {torch.float16: torch.bfloat16, torch.bfloat16: torch.float16}


def resolve_mix(mix: Mix, lower: torch.dtype) -> tuple[torch.dtype, ...]:
    """The torch dtypes of ``mix`` under autocast to ``lower``."""
    roles = {MixRole.LOWER: lower, MixRole.FOREIGN: FOREIGN.get(lower, torch.float16)}
    return tuple(roles[m] if isinstance(m, MixRole) else m for m in mix)


def _recast(arg: Any, value: Any, dtypes: Sequence[torch.dtype], counter: list[int]) -> Any:
    if isinstance(arg, TensorArg) and isinstance(value, torch.Tensor):
        if not arg.is_test_float:
            return value
        k = counter[0]
        counter[0] += 1
        dt = dtypes[min(k, len(dtypes) - 1)]
        if value.dtype == dt:
            return value
        return value.detach().to(dt).requires_grad_(value.requires_grad)
    if isinstance(arg, ListArg) and isinstance(value, list):
        return [_recast(a, v, dtypes, counter) for a, v in zip(arg.items, value, strict=True)]
    return value


def make_inputs(
    sample: Sample, dtypes: Sequence[torch.dtype], device: str, seed: int = 0, requires_grad: bool = False
) -> Materialized:
    """The sample's arguments on ``device``, its test-float tensors taking ``dtypes`` in order.

    ``requires_grad``: every floating leaf requires grad, but those of ``constant`` arguments.
    """
    base = materialize(sample, torch.float32, device, seed)
    counter = [0]
    args = tuple(_recast(a, v, dtypes, counter) for a, v in zip(sample.args, base.args, strict=True))
    kwargs = {k: _recast(sample.kwargs[k], v, dtypes, counter) for k, v in base.kwargs.items()}
    m = Materialized(args, kwargs)
    if requires_grad:
        constants: list[torch.Tensor] = []
        for a, v in [
            *zip(sample.args, args, strict=True),
            *((sample.kwargs[k], v) for k, v in kwargs.items()),
        ]:
            _constants(a, v, constants)
        for t in m.tensors():
            if t.is_floating_point() and t.is_leaf and not any(t is c for c in constants):
                t.requires_grad_(True)
    return m


def _constants(arg: Any, value: Any, out: list[torch.Tensor]) -> None:
    """The tensors of ``constant`` sample arguments, into ``out``."""
    if isinstance(arg, TensorArg) and isinstance(value, torch.Tensor) and arg.constant:
        out.append(value)
    elif isinstance(arg, ListArg) and isinstance(value, list):
        for a, v in zip(arg.items, value, strict=True):
            _constants(a, v, out)


def case_inputs(sample: Sample, mix: Mix, lower: torch.dtype, device: str, seed: int = 0) -> Materialized:
    """``make_inputs`` with the case's mix resolved under ``lower``."""
    return make_inputs(sample, resolve_mix(mix, lower), device, seed)


def _rebuild(value: Any, it: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return next(it)
    if isinstance(value, (list, tuple)):
        return type(value)(_rebuild(v, it) for v in value)
    return value


def rebuilt(m: Materialized, tensors: Sequence[torch.Tensor]) -> Materialized:
    """``m`` with its tensors replaced, in order, by ``tensors``."""
    it = iter(tensors)
    args = tuple(_rebuild(a, it) for a in m.args)
    return Materialized(args, {k: _rebuild(v, it) for k, v in m.kwargs.items()})


def map_floats(m: Materialized, fn: Callable[[torch.Tensor], torch.Tensor]) -> Materialized:
    """``m`` with ``fn`` applied to each floating tensor."""
    return rebuilt(m, [fn(t) if t.is_floating_point() else t for t in m.tensors()])


def flat_tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    """The tensors among ``values`` (tensor lists flattened), in order."""
    out: list[torch.Tensor] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out

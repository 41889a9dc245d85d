"""Running one op call natively and through the reference, on the backend's tensors.

The side effects of the suite live here: making tensors (real, or FakeTensors in
policy-only mode), entering native autocast, calling entry points, and
intercepting what arrives below the Autocast dispatch key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.catalog import EntryPoint, ListArg, Sample, TensorArg
from autocast_spec.model import Spec
from reference_impl.dtypes import dtype_name, dtype_of
from reference_impl.oracle import oracle_call
from reference_impl.policy import AutocastState, CastPlan, decide
from reference_impl.runtime import Call, Intercepted, autograd_key_for, intercept, quiet
from reference_impl.samples import Materialized, call_entry_point, materialize, output_tensors
from reference_impl.torch_registry import op_overload

from .target import Target

# An input mix: the dtypes given to the sample's test-float tensors, in order
# (the last one repeats). "lower" means the autocast dtype under test.
Mix = tuple[str, ...]


# "foreign": the other lower dtype (float16 under bfloat16 autocast and the reverse).
FOREIGN = {"float16": "bfloat16", "bfloat16": "float16"}


def resolve_mix(mix: Mix, lower: str) -> tuple[torch.dtype, ...]:
    names = {"lower": lower, "foreign": FOREIGN.get(lower, "float16")}
    return tuple(dtype_of(names.get(m, m)) for m in mix)


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
    """The sample's arguments on ``device``, test-float tensors taking ``dtypes`` in order.

    Call inside ``target.tensors(device)``.
    """
    base = materialize(sample, torch.float32, device, seed)
    counter = [0]
    args = tuple(_recast(a, v, dtypes, counter) for a, v in zip(sample.args, base.args, strict=True))
    kwargs = {k: _recast(sample.kwargs[k], v, dtypes, counter) for k, v in base.kwargs.items()}
    m = Materialized(args, kwargs)
    if requires_grad:
        for t in m.tensors():
            if t.is_floating_point() and t.is_leaf:
                t.requires_grad_(True)
    return m


def count_test_floats(sample: Sample) -> int:
    def count(a: Any) -> int:
        if isinstance(a, TensorArg):
            return 1 if a.is_test_float else 0
        if isinstance(a, ListArg):
            return sum(count(x) for x in a.items)
        return 0

    return sum(count(a) for a in (*sample.args, *sample.kwargs.values()))


def call_entry(op: str, entry: str, m: Materialized) -> Any:
    """Call ``entry`` (a public entry point name, or the aten op itself)."""
    if entry == op:
        return op_overload(op)(*m.args, **m.kwargs)
    return call_entry_point(EntryPoint(entry), m)


@dataclass(frozen=True)
class Outcome:
    """What a call did: its output, or the error it raised."""

    value: Any = None
    error: BaseException | None = None
    first_only: bool = False  # only the first output's dtype is known (policy-only fallback)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(dtype_name(t.dtype) for t in output_tensors(self.value))

    def tensors(self) -> list[torch.Tensor]:
        return output_tensors(self.value)


def capture(fn: Callable[[], Any]) -> Outcome:
    try:
        return Outcome(value=fn())
    except Exception as e:
        return Outcome(error=e)


def run_native(target: Target, lower: torch.dtype, fn: Callable[[], Any]) -> Outcome:
    """``fn()`` under the backend's native autocast."""
    with quiet(), target.autocast(lower):
        return capture(fn)


def reference_spec(target: Target) -> Spec:
    """The spec the oracle reads, with the device spec named as the backend."""
    return target.reference_spec


def state_for(target: Target, lower: torch.dtype, device: str | None = None) -> AutocastState:
    return AutocastState(device or target.device, lower, True)


def run_oracle(target: Target, lower: torch.dtype, op: str, m: Materialized) -> Outcome:
    """The reference: the spec's cast plan applied explicitly, kernels called below autocast."""
    with quiet():
        return capture(
            lambda: oracle_call(reference_spec(target), state_for(target, lower), op, m.args, m.kwargs)
        )


def plan_for(target: Target, lower: torch.dtype, op: str, m: Materialized) -> CastPlan:
    spec = target.spec
    return decide(
        target.device_spec, spec.rules, state_for(target, lower), op, m.args, m.kwargs, spec.op_info(op)
    )


def intercepted(
    target: Target, lower: torch.dtype, op: str, fn: Callable[[], Any], enabled: bool = True
) -> tuple[list[Call], BaseException | None]:
    """The calls to ``op``'s name that arrive right below the backend's Autocast key.

    A recording kernel at the Autograd key stops each call before any kernel
    runs, so shapes do not matter and nothing executes.
    """
    key = autograd_key_for(target.dispatch_key)
    error: BaseException | None = None
    with quiet(), target.autocast(lower, enabled), intercept(op, key) as calls:
        try:
            fn()
        except Intercepted:
            pass
        except Exception as e:
            error = e
    return calls, error


def tensor_dtypes(values: Sequence[Any]) -> list[str]:
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            out.append(dtype_name(v.dtype))
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    for v in values:
        walk(v)
    return out

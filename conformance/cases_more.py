"""Spec -> test cases for the checks that look past output dtypes.

* ``promote_widest``: every promote op, every test-float tensor argument in turn holding
  the widest dtype (float32) and the rest the lower dtype, optional tensors included
  (the input mix's name says ``optional`` there).
* ``promote_foreign``: every promote op with float16 and bfloat16 inputs together
  (``rules.promote.foreign_float``).
* ``checkpoint``: every lower_precision_fp / fp32 op, ``torch.utils.checkpoint`` with
  ``use_reentrant`` True and False.
* ``functorch``: every listed op's first sample through ``torch.vmap`` and, for ops
  autograd covers, ``torch.func.grad`` (the catalog's ``functorch_gaps`` say where not).
"""

from __future__ import annotations

from typing import Any

from autocast_spec.catalog import ListArg, Sample, TensorArg
from autocast_spec.model import Policy
from reference_impl.signatures import SlotKind, signature

from .cases import DISCRIMINATING_MIX, Case, _info, _listed
from .runner import count_test_floats
from .target import Target

GRAD_POLICIES = (Policy.LOWER_PRECISION_FP, Policy.FP32)


def test_float_slots(op: str, sample: Sample) -> list[SlotKind]:
    """For each test-float tensor of ``sample`` (in mix order), the kind of its schema slot."""
    sig = signature(op)
    by_name = {s.name: s for s in sig.slots}
    out: list[SlotKind] = []

    def walk(a: Any, kind: SlotKind) -> None:
        if isinstance(a, TensorArg) and a.is_test_float:
            out.append(kind)
        elif isinstance(a, ListArg):
            for x in a.items:
                walk(x, kind)

    for i, a in enumerate(sample.args):
        walk(a, sig.slots[i].kind if i < len(sig.slots) else SlotKind.OTHER)
    for k, a in sample.kwargs.items():
        walk(a, by_name[k].kind if k in by_name else SlotKind.OTHER)
    return out


def widest_inputs(i: int, kind: SlotKind) -> str:
    return f"widest_in_{i}" + ("_optional" if kind is SlotKind.OPTIONAL_TENSOR else "")


def promote_widest(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op in target.device_spec.ops_with(Policy.PROMOTE):
            info = _info(target, op)
            if info is None or count_test_floats(info.samples[0]) < 2:
                continue
            kinds = test_float_slots(op, info.samples[0])
            for i, kind in enumerate(kinds):
                mix = tuple("float32" if j == i else "lower" for j in range(len(kinds)))
                out.append(
                    Case(
                        "promote",
                        target.device,
                        dtype,
                        "promote",
                        op,
                        op,
                        inputs=widest_inputs(i, kind),
                        mix=mix,
                    )
                )
    return out


def promote_foreign(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op in target.device_spec.ops_with(Policy.PROMOTE):
            info = _info(target, op)
            if info is None or count_test_floats(info.samples[0]) < 2:
                continue
            out.append(
                Case(
                    "promote",
                    target.device,
                    dtype,
                    "promote",
                    op,
                    op,
                    inputs="foreign_float",
                    mix=("lower", "foreign"),
                )
            )
    return out


def checkpoint(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target, dtype):
            if pol not in GRAD_POLICIES or _info(target, op) is None:
                continue
            for reentrant in ("reentrant", "non_reentrant"):
                out.append(
                    Case(
                        "autograd",
                        target.device,
                        dtype,
                        pol.value,
                        op,
                        op,
                        kind=f"checkpoint_{reentrant}",
                        mix=DISCRIMINATING_MIX[pol],
                    )
                )
    return out


def functorch(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target, dtype):
            info = _info(target, op)
            if info is None or pol is Policy.BANNED:
                continue
            transforms = ("vmap", "grad") if pol in GRAD_POLICIES else ("vmap",)
            for t in transforms:
                out.append(
                    Case(
                        "functorch",
                        target.device,
                        dtype,
                        pol.value,
                        op,
                        op,
                        kind=t,
                        mix=DISCRIMINATING_MIX[pol],
                    )
                )
    return out

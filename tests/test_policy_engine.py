"""The pure policy engine: each rule of autocast_mode.h, on ops chosen from the spec by policy.

Policies CPU lacks (fp32_set_opt_dtype, fp32_append_dtype, banned) are taken
from the cuda spec and decided for CPU tensors by a copy of it renamed to
"cpu": the engine only sees the device name, the policies and the tensors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import torch

from autocast_spec.model import DeviceSpec, Policy
from reference_impl.engine.oracle import BannedOpError, apply_plan
from reference_impl.engine.policy import AutocastState, CastPlan, decide
from reference_impl.engine.signatures import SlotKind, signature
from reference_impl.engine.torch_registry import inplace_variant, out_variant
from reference_impl.harness.samples import materialize
from reference_impl.spectools.installed_spec import load_installed_spec

SPEC = load_installed_spec()
RULES = SPEC.rules
BF16 = AutocastState("cpu", torch.bfloat16)


def as_cpu(device: str) -> DeviceSpec:
    return SPEC.device(device).renamed("cpu")


def pick(policy: Policy, where: DeviceSpec, pred: Callable[[str], bool] = lambda op: True) -> str:
    for op in where.ops_with(policy):
        info = SPEC.op_info(op)
        if info and info.samples and pred(op):
            return op
    pytest.fail(f"the spec has no {policy} op with samples matching the test's needs")


def sample(op: str, dtype: torch.dtype = torch.float32) -> tuple[tuple[Any, ...], dict[str, Any]]:
    m = materialize(SPEC.ops[op].samples[0], dtype, "cpu")
    return m.args, m.kwargs


def plan_of(dspec: DeviceSpec, op: str, args: Any, kwargs: Any, state: AutocastState = BF16) -> CastPlan:
    return decide(dspec, RULES, state, op, args, kwargs, SPEC.op_info(op))


def cast_paths(plan: CastPlan) -> set[tuple[Any, ...]]:
    return {c.path for c in plan.casts}


def float_paths(args: Any, kwargs: Any) -> set[tuple[Any, ...]]:
    """Paths of every floating tensor in the call (lists included)."""
    out = set()
    for where, items in (("args", enumerate(args)), ("kwargs", kwargs.items())):
        for k, v in items:
            if isinstance(v, torch.Tensor) and v.is_floating_point():
                out.add((where, k))
            elif isinstance(v, (list, tuple)):
                out |= {(where, k, j) for j, t in enumerate(v) if isinstance(t, torch.Tensor)}
    return out


CPU = SPEC.device("cpu")
CUDA_AS_CPU = as_cpu("cuda")


def test_lower_precision_fp_casts_every_eligible_tensor() -> None:
    op = pick(Policy.LOWER_PRECISION_FP, CPU)
    args, kwargs = sample(op)
    plan = plan_of(CPU, op, args, kwargs)
    assert plan.policy is Policy.LOWER_PRECISION_FP and plan.raises is None
    assert cast_paths(plan) == float_paths(args, kwargs)
    assert all(c.from_dtype == torch.float32 and c.to_dtype == torch.bfloat16 for c in plan.casts)


def test_already_lower_inputs_are_not_cast() -> None:
    op = pick(Policy.LOWER_PRECISION_FP, CPU)
    args, kwargs = sample(op, torch.bfloat16)
    assert plan_of(CPU, op, args, kwargs).casts == ()


def test_float64_and_other_devices_are_not_eligible() -> None:
    op = pick(Policy.LOWER_PRECISION_FP, CPU)
    for dtype in (torch.float64,):
        args, kwargs = sample(op, dtype)
        assert plan_of(CPU, op, args, kwargs).casts == ()
    args, kwargs = sample(op)
    meta = tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)
    assert plan_of(CPU, op, meta, kwargs).casts == ()


def test_weight_flag_marks_float32_leaves_requiring_grad() -> None:
    op = pick(Policy.LOWER_PRECISION_FP, CPU)
    args, kwargs = sample(op)
    first = args[0].clone().requires_grad_(True)
    plan = plan_of(CPU, op, (first, *args[1:]), kwargs)
    assert {c.path for c in plan.casts if c.weight} == {("args", 0)}
    nonleaf = first * 1
    plan = plan_of(CPU, op, (nonleaf, *args[1:]), kwargs)
    assert not any(c.weight for c in plan.casts)


def test_fp32_casts_lower_inputs_up() -> None:
    op = pick(Policy.FP32, CPU)
    args, kwargs = sample(op, torch.bfloat16)
    plan = plan_of(CPU, op, args, kwargs)
    assert cast_paths(plan) == float_paths(args, kwargs)
    assert all(c.to_dtype == torch.float32 and not c.weight for c in plan.casts)


def _has_list(op: str) -> bool:
    return any(s.kind is SlotKind.TENSOR_LIST for s in signature(op).slots)


def test_promote_widest_type_inside_lists() -> None:
    op = pick(Policy.PROMOTE, CPU, _has_list)
    args, kwargs = sample(op, torch.bfloat16)
    plan = plan_of(CPU, op, args, kwargs)
    assert plan.casts == ()  # all bfloat16: nothing to do
    slot = next(s for s in signature(op).slots if s.kind is SlotKind.TENSOR_LIST)
    lst = list(args[slot.index])
    lst[0] = lst[0].float()
    mixed = (*args[: slot.index], lst, *args[slot.index + 1 :])
    plan = plan_of(CPU, op, mixed, kwargs)
    assert {c.path for c in plan.casts} == {("args", slot.index, j) for j in range(1, len(lst))}
    assert all(c.to_dtype == torch.float32 for c in plan.casts)
    lst[0] = lst[0].double()  # float64 is ignored by promote_type: the rest stays bfloat16
    assert plan_of(CPU, op, (*args[: slot.index], lst, *args[slot.index + 1 :]), kwargs).casts == ()
    lst[0] = lst[0].half()  # two different lower dtypes: the rule promotes both to float32
    foreign = (*args[: slot.index], lst, *args[slot.index + 1 :])
    plan = plan_of(CPU, op, foreign, kwargs)
    assert plan.raises is None and {c.to_dtype for c in plan.casts} == {torch.float32}
    assert len(plan.casts) == len(lst)
    # with foreign_float action 'error' (torch's prioritize) the plan raises its message
    raising = dataclasses.replace(
        RULES, promote=dataclasses.replace(RULES.promote, foreign_float_action="error")
    )
    plan = decide(CPU, raising, BF16, op, foreign, kwargs, SPEC.op_info(op))
    assert plan.raises is not None and "prioritize" in plan.raises


def test_fp32_set_opt_dtype() -> None:
    op = pick(Policy.FP32_SET_OPT_DTYPE, CUDA_AS_CPU)
    state = AutocastState("cpu", torch.float16)
    args, kwargs = sample(op, torch.float16)
    plan = plan_of(CUDA_AS_CPU, op, args, kwargs, state)
    assert plan.set_dtype == torch.float32 and plan.casts == ()
    a, k = apply_plan(plan, args, kwargs)
    assert torch.float32 in (*a, *k.values())
    # a dtype given by the caller is kept
    name = signature(op).optional_dtype_slots[0].name
    assert plan_of(CUDA_AS_CPU, op, args, {**kwargs, name: torch.float16}, state).untouched
    # first argument not eligible (float64): untouched
    args64, kwargs64 = sample(op, torch.float64)
    assert plan_of(CUDA_AS_CPU, op, args64, kwargs64, state).untouched


def test_fp32_append_dtype() -> None:
    op = pick(Policy.FP32_APPEND_DTYPE, CUDA_AS_CPU)
    state = AutocastState("cpu", torch.float16)
    info = SPEC.op_info(op)
    assert info is not None and info.append_dtype_target
    args, kwargs = sample(op, torch.float16)
    plan = plan_of(CUDA_AS_CPU, op, args, kwargs, state)
    assert plan.append_target == info.append_dtype_target and plan.set_dtype == torch.float32
    _, k = apply_plan(plan, args, kwargs)
    assert torch.float32 in k.values()
    # not eligible: the first argument's own dtype is appended (type_from_firstarg)
    args64, kwargs64 = sample(op, torch.float64)
    plan = plan_of(CUDA_AS_CPU, op, args64, kwargs64, state)
    assert plan.append_target == info.append_dtype_target and plan.set_dtype == torch.float64


def test_banned_raises_the_spec_message() -> None:
    op = pick(Policy.BANNED, CUDA_AS_CPU)
    args, kwargs = sample(op)
    plan = plan_of(CUDA_AS_CPU, op, args, kwargs)
    assert plan.raises == CUDA_AS_CPU.ops[op].message
    with pytest.raises(BannedOpError, match="unsafe to autocast"):
        apply_plan(plan, args, kwargs)


def test_disabled_and_unlisted_are_untouched() -> None:
    op = pick(Policy.LOWER_PRECISION_FP, CPU)
    args, kwargs = sample(op)
    assert plan_of(CPU, op, args, kwargs, AutocastState("cpu", torch.bfloat16, enabled=False)).untouched
    for variant in (inplace_variant(op), out_variant(op)):
        if variant:
            plan = plan_of(CPU, variant, args, kwargs)
            assert plan.untouched and "not listed" in plan.reason


def test_mutable_overload_listed_by_a_spec_is_still_untouched() -> None:
    op = next(
        (o for o in CPU.ops_with(Policy.LOWER_PRECISION_FP) if out_variant(o) and SPEC.op_info(o)), None
    )
    if op is None:
        pytest.fail("no lower_precision_fp op with an out= variant in the spec")
    out_op = out_variant(op)
    assert out_op is not None
    planted = dataclasses.replace(CPU, ops={**CPU.ops, out_op: CPU.ops[op]})  # a deliberately wrong spec
    args, kwargs = sample(op)
    plan = plan_of(planted, out_op, args, {**kwargs, "out": torch.empty(0)})
    assert plan.untouched and "mutates" in plan.reason

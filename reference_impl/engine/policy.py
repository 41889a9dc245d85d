"""The pure policy engine: one op call under autocast -> its cast plan.

Given a device spec, the shared rules, the autocast state and an op call's
arguments, :func:`decide` returns a :class:`CastPlan` saying which argument goes
to which dtype, which dtype argument is set or appended, or that the call must
raise. Nothing is cast or called here; the oracle (:mod:`reference_impl.engine.oracle`)
and the whole-program reference (:mod:`reference_impl.kernels.reference_autocast`) apply
plans.

The rules follow PyTorch's ``aten/src/ATen/autocast_mode.h`` / ``.cpp``:

* ``is_eligible``: a defined tensor that is floating point, not float64 (the
  spec's ``never_cast``) and on the autocast device (``is_autocast_eligible``).
* ``cached_cast`` casts every eligible argument whose dtype differs from the
  target: ``Tensor``, ``Tensor?`` and ``Tensor[]`` arguments; ``Tensor?[]``
  (``index_put``'s indices) and non-tensor arguments pass through.
* ``promote`` (``promote_type``/``prioritize``): start from the autocast dtype;
  an eligible float32 argument makes float32; two different lower-precision
  dtypes are an error.
* ``fp32_set_opt_dtype``: when the first argument is eligible, every
  ``ScalarType?`` argument left unset becomes float32; otherwise nothing changes.
* ``fp32_append_dtype``: redispatch to the op's ``append_dtype_target`` overload
  with a dtype appended: float32 when the first argument is eligible, else the
  first argument's own dtype (``type_from_firstarg``).
* ``banned``: raise the spec's message.
* ``lower_first_arg`` (a vendor's policy: the Habana Gaudi bridge): only the
  first argument, when eligible, is cast to the lower dtype.
* An entry's ``by_dtype`` gives its policy under one lower dtype (IPEX: conv
  lower under bfloat16, fp32 under float16; ``none``: uncast under that dtype).
* A device whose ``cast_cache`` is false never marks a cast as a weight-cache
  candidate (the Habana bridge casts afresh on every call).
* A device with ``cast_only_between`` makes only the casts between those dtypes
  (IPEX: float32 and the autocast dtype); other eligible tensors pass as they are.
* Mutable schemas (in-place, ``out=``) and ops the device spec does not list
  are untouched.

No op name or policy is written here: they all come from the spec model and
the op schemas of the installed torch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from autocast_spec.catalog import OpInfo
from autocast_spec.higher_order import HigherOrderKernel
from autocast_spec.model import DeviceSpec, Policy, Rules

from .dtypes import dtype_name
from .eligibility import Eligible, eligibility, weight_tensor
from .signatures import OpSignature, Path, SlotKind, signature, slot_value


@dataclass(frozen=True)
class AutocastState:
    """The autocast state one op call sees: device type, lower dtype, on/off."""

    device: str
    dtype: torch.dtype
    enabled: bool = True


@dataclass(frozen=True)
class ArgCast:
    """Cast the argument at ``path`` from ``from_dtype`` to ``to_dtype``.

    ``path`` is ``("args", 0)``, ``("args", 0, 2)`` for the third tensor of a
    list argument, or ``("kwargs", "weight")``. ``weight`` is True when the
    argument is a weight-cache candidate under ``rules.cache`` (a float32 leaf
    that requires grad, cast to the lower dtype by a caching policy); whether it
    is really cached depends on ``cache_enabled`` in the running region.
    ``cacheable``: the cast itself qualifies (:func:`cacheable`), whatever the tensor;
    ``weight`` is ``cacheable`` and the tensor a weight (:func:`weight_tensor`).
    """

    path: Path
    from_dtype: torch.dtype
    to_dtype: torch.dtype
    weight: bool = False
    cacheable: bool = False


@dataclass(frozen=True)
class CastPlan:
    """What autocast does to one op call.

    ``set_dtype`` is the dtype written into the op's unset ``ScalarType?``
    arguments (``fp32_set_opt_dtype``) or appended (``fp32_append_dtype``), at
    ``dtype_paths``. With ``append_target`` set, the call goes to that overload.
    ``raises`` is the error message of a call autocast refuses. ``reason`` says in
    words why the plan is what it is (also why a call is untouched).
    """

    op: str
    policy: Policy | None
    casts: tuple[ArgCast, ...]
    set_dtype: torch.dtype | None
    append_target: str | None
    raises: str | None
    reason: str
    dtype_paths: tuple[Path, ...] = ()

    @property
    def target_op(self) -> str:
        """The overload actually called."""
        return self.append_target or self.op

    @property
    def untouched(self) -> bool:
        return not self.casts and self.set_dtype is None and self.raises is None and not self.append_target


def cacheable(
    from_dtype: torch.dtype, to_dtype: torch.dtype, policy: Policy, state: AutocastState, rules: Rules
) -> bool:
    """The cast half of ``can_try_cache``: a cast by a caching policy to the autocast dtype,
    from a source dtype the cache takes. A cast is a weight cast when this holds and its
    tensor passes :func:`weight_tensor`."""
    c = rules.cache
    return policy in c.policies and to_dtype == state.dtype and dtype_name(from_dtype) in c.source_dtypes


# ---------------------------------------------------------------------------
# The decision
# ---------------------------------------------------------------------------


def _tensor_args(
    sig: OpSignature, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> list[tuple[Path, torch.Tensor]]:
    """Every tensor autocast's ``cached_cast`` would see, in argument order."""
    out: list[tuple[Path, torch.Tensor]] = []
    for slot in sig.tensor_slots:
        path, value = slot_value(slot, args, kwargs)
        if path is None or value is None:
            continue
        if slot.kind is SlotKind.TENSOR_LIST:
            for j, item in enumerate(value):
                if isinstance(item, torch.Tensor):
                    out.append(((*path, j), item))
        elif isinstance(value, torch.Tensor):
            out.append((path, value))
    return out


def _first_arg(sig: OpSignature, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    if not sig.slots:
        return None
    return slot_value(sig.slots[0], args, kwargs)[1]


def untouched_plan(op: str, policy: Policy | None, reason: str) -> CastPlan:
    """The plan that leaves ``op``'s arguments as they are (no cast, no error), and why."""
    return CastPlan(op, policy, (), None, None, None, reason)


def promote_type(
    state: AutocastState, tensors: Sequence[torch.Tensor], eligible: Eligible, rules: Rules
) -> torch.dtype | str:
    """``promote_type``: the widest eligible dtype, or the error message.

    A floating input that is neither float32 nor the autocast dtype is 'foreign':
    ``rules.promote`` says whether that raises (PyTorch's ``prioritize``) or promotes.
    """
    current = state.dtype
    for t in tensors:
        if not eligible(t):
            continue
        nxt = t.dtype
        if current == torch.float32 or nxt == torch.float32:
            current = torch.float32
        elif current == state.dtype and nxt == state.dtype:
            current = state.dtype
        elif rules.promote.foreign_float_action == "promote":
            current = torch.promote_types(current, nxt)
        else:
            return rules.promote.foreign_float_message
    return current


@dataclass(frozen=True)
class _Ctx:
    """What every cast of one decision shares."""

    policy: Policy
    state: AutocastState
    rules: Rules
    eligible: Eligible
    cache: bool  # the device caches weight casts (``cast_cache``)
    device: DeviceSpec


def casts_between(device: DeviceSpec, source: str, target: str, lower: str) -> bool:
    """Whether ``device``'s autocast casts a ``source`` tensor to ``target`` (dtype names) under
    autocast dtype ``lower`` (``cast_only_between``; IPEX casts float32 <-> lower only)."""
    if not device.cast_only_between:
        return True
    allowed = {lower if d == "lower" else d for d in device.cast_only_between}
    return source in allowed and target in allowed


def _made(t: torch.Tensor, to_dtype: torch.dtype, ctx: _Ctx) -> bool:
    """The cast of ``t`` to ``to_dtype`` is made: eligible, a change, and a pair the device casts."""
    if not ctx.eligible(t) or t.dtype == to_dtype:
        return False
    d = ctx.device
    return not d.cast_only_between or casts_between(
        d, dtype_name(t.dtype), dtype_name(to_dtype), dtype_name(ctx.state.dtype)
    )


def _cast(path: Path, t: torch.Tensor, to_dtype: torch.dtype, ctx: _Ctx) -> ArgCast:
    cache = ctx.cache and cacheable(t.dtype, to_dtype, ctx.policy, ctx.state, ctx.rules)
    return ArgCast(path, t.dtype, to_dtype, cache and weight_tensor(ctx.rules.cache)(t), cache)


def _casts(
    tensors: Sequence[tuple[Path, torch.Tensor]], to_dtype: torch.dtype, ctx: _Ctx
) -> tuple[ArgCast, ...]:
    return tuple(_cast(path, t, to_dtype, ctx) for path, t in tensors if _made(t, to_dtype, ctx))


def decide(
    device: DeviceSpec,
    rules: Rules,
    state: AutocastState,
    op: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    op_info: OpInfo | None = None,
) -> CastPlan:
    """The cast plan of ``op(*args, **kwargs)`` under ``state`` on ``device``."""
    entry = device.ops.get(op)
    if not state.enabled:
        return untouched_plan(op, None, "autocast is disabled")
    if state.device != device.device:
        why = f"autocast state is for {state.device!r}, the spec for {device.device!r}"
        return untouched_plan(op, None, why)
    if entry is None:
        return untouched_plan(op, None, f"{op} is not listed by the {device.device} spec: falls through")
    under = dtype_name(state.dtype)
    policy = entry.policy_under(under)
    if policy is None:
        return untouched_plan(op, None, f"{op}: passes uncast under {under} (by_dtype)")
    sig = signature(op)
    if rules.out_of_place_only and sig.mutable:
        return untouched_plan(op, policy, f"{op} mutates an argument (in-place or out=): never autocast")
    eligible = eligibility(rules, device.device)
    ctx = _Ctx(policy, state, rules, eligible, device.cast_cache, device)

    if policy is Policy.BANNED:
        msg = entry.message or f"{op} is banned under {device.device} autocast"
        return CastPlan(op, policy, (), None, None, msg, "banned by the spec")

    if policy in (Policy.LOWER_PRECISION_FP, Policy.FP32):
        to = state.dtype if policy is Policy.LOWER_PRECISION_FP else torch.float32
        casts = _casts(_tensor_args(sig, args, kwargs), to, ctx)
        return CastPlan(
            op, policy, casts, None, None, None, f"{policy}: eligible tensors to {dtype_name(to)}"
        )

    if policy is Policy.PROMOTE:
        tensors = _tensor_args(sig, args, kwargs)
        widest = promote_type(state, [t for _, t in tensors], eligible, rules)
        if isinstance(widest, str):
            return CastPlan(op, policy, (), None, None, widest, "promote: mixed lower-precision dtypes")
        casts = _casts(tensors, widest, ctx)
        return CastPlan(
            op, policy, casts, None, None, None, f"promote: widest eligible type {dtype_name(widest)}"
        )

    if policy is Policy.LOWER_FIRST_ARG:
        at = slot_value(sig.slots[0], args, kwargs)[0] if sig.slots else None
        firsts = [(p, t) for p, t in _tensor_args(sig, args, kwargs) if at and p[: len(at)] == at]
        casts = _casts(firsts, state.dtype, ctx)
        return CastPlan(
            op, policy, casts, None, None, None, f"lower_first_arg: the first argument to {under}"
        )

    first = _first_arg(sig, args, kwargs)
    first_ok = eligible(first)

    if policy is Policy.FP32_SET_OPT_DTYPE:
        if not first_ok:
            return untouched_plan(op, policy, "fp32_set_opt_dtype: first argument not eligible")
        unset = tuple(
            path if path is not None else ("kwargs", s.name)
            for s in sig.optional_dtype_slots
            for path, value in [slot_value(s, args, kwargs)]
            if value is None
        )
        if not unset:
            return untouched_plan(op, policy, "fp32_set_opt_dtype: a dtype was given")
        return CastPlan(op, policy, (), torch.float32, None, None, "fp32_set_opt_dtype: dtype=float32", unset)

    if policy is Policy.FP32_APPEND_DTYPE:
        target = op_info.append_dtype_target if op_info else None
        if target is None:
            raise ValueError(f"{op} is fp32_append_dtype but the op catalog gives no append_dtype_target")
        if first_ok:
            out = torch.float32
        elif isinstance(first, torch.Tensor):
            out = first.dtype
        else:
            raise TypeError(
                f"{op}: fp32_append_dtype needs a tensor first argument, got {type(first).__name__}"
            )
        name = appended_arg(op, target)
        return CastPlan(
            op,
            policy,
            (),
            out,
            target,
            None,
            f"fp32_append_dtype: call {target} with dtype={dtype_name(out)}",
            (("kwargs", name),),
        )

    raise AssertionError(f"unhandled policy {policy}")  # pragma: no cover - Policy is closed


@functools.cache
def appended_arg(op: str, target: str) -> str:
    """The name of the dtype argument ``target`` has and ``op`` lacks."""
    have = {s.name for s in signature(op).slots}
    extra = [s for s in signature(target).slots if s.name not in have]
    if len(extra) != 1 or extra[0].kind is not SlotKind.DTYPE:
        raise ValueError(f"{target} is not {op} with one dtype argument appended")
    return extra[0].name


def expected_output_dtype(plan: CastPlan, state: AutocastState) -> torch.dtype | None:
    """The dtype the op computes in under ``plan``; None when autocast leaves it alone."""
    if plan.raises or plan.policy is None or not state.enabled:
        return None
    if plan.set_dtype is not None:
        return plan.set_dtype
    if plan.policy is Policy.LOWER_PRECISION_FP:
        return state.dtype
    if plan.policy is Policy.FP32:
        return torch.float32
    if plan.casts:
        return plan.casts[0].to_dtype
    return None


def higher_order_cast(listed: HigherOrderKernel, device: str) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    """``listed``'s policy on its leading arguments: lower_precision_fp casts each floating
    tensor of the device other than float64 to the autocast dtype; ``none`` passes them on."""
    count = len(listed.args) if listed.policy == "lower_precision_fp" else 0

    def cast(args: tuple[Any, ...]) -> tuple[Any, ...]:
        dtype = torch.get_autocast_dtype(device)
        head = tuple(
            a.to(dtype)
            if isinstance(a, torch.Tensor)
            and a.is_floating_point()
            and a.dtype != torch.float64
            and a.device.type == device
            else a
            for a in args[:count]
        )
        return head + tuple(args[count:])

    return cast

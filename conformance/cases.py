"""Spec -> test cases: pure functions from a :class:`Target` to parametrization.

Each category has a generator returning :class:`Case` objects in a stable order
(so pytest-xdist workers agree); :mod:`conformance.registry` names them, with
the categories they belong to and the coverage every listed op owes them.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

from autocast_spec.model import OpInfo, Policy, Rules
from reference_impl.policy import SlotKind, signature
from reference_impl.runtime import synthesize_call
from reference_impl.torch_registry import (
    all_op_names,
    autocast_registrations,
    inplace_variant,
    op_exists,
    out_variant,
    split_op_name,
)

from .runner import Mix, count_test_floats
from .target import Target

UNLISTED = "unlisted"


@dataclass(frozen=True)
class Case:
    """One generated test: what to call, on which dtype, and why."""

    category: str
    device: str
    dtype: str = ""  # the lower dtype under test ("" where none applies)
    policy: str = ""
    op: str = ""
    entry: str = ""  # entry point name, or the op itself
    sample: int = 0
    variant: str = ""  # eligibility kind, input mix, ...
    mix: Mix = ()
    seed: int = 0  # the values' seed (Hypothesis draws it)

    @property
    def id(self) -> str:
        parts = [self.device, self.dtype, self.policy, self.op]
        if self.entry and self.entry != self.op:
            parts.append(self.entry)
        if self.sample:
            parts.append(f"sample{self.sample}")
        if self.variant:
            parts.append(self.variant)
        return "-".join(p for p in parts if p)

    @property
    def markers(self) -> tuple[str, ...]:
        return tuple(m for m in (self.category, self.policy) if m)


# The input mix per policy that makes the policy visible: a lower op gets
# float32 inputs, an fp32 op gets lower inputs, promote gets one of each.
DISCRIMINATING_MIX: dict[Policy, Mix] = {
    Policy.LOWER_PRECISION_FP: ("float32",),
    Policy.FP32: ("lower",),
    Policy.FP32_SET_OPT_DTYPE: ("lower",),
    Policy.FP32_APPEND_DTYPE: ("lower",),
    Policy.PROMOTE: ("lower", "float32"),
    Policy.BANNED: ("float32",),
}

PROMOTE_MIXES: dict[str, Mix] = {
    "lower+float32": ("lower", "float32"),
    "float32+lower": ("float32", "lower"),
    "all_lower": ("lower",),
    "all_float32": ("float32",),
    "lower+float64": ("lower", "float64"),
}

# Eligibility kinds: inputs autocast must leave alone. ``dtype`` kinds replace
# every test-float tensor; the rest are about where/how the op is called.
NON_FLOATING_KINDS = ("int64", "bool")
ELIGIBILITY_CALL_KINDS = ("other_device", "inplace", "out")


def eligibility_dtype_kinds(rules: Rules) -> dict[str, str]:
    """The input dtypes rules.eligibility says are never cast: each never_cast dtype, and
    integer and bool tensors under floating_only."""
    kinds = {d: d for d in rules.eligibility.never_cast}
    if rules.eligibility.floating_only:
        kinds.update({k: k for k in NON_FLOATING_KINDS})
    return kinds


def other_device(device: str) -> str:
    """A device type whose tensors the backend's autocast must not touch."""
    return "cpu" if device != "cpu" else "meta"


def _listed(target: Target) -> list[tuple[str, Policy]]:
    return [(op, e.policy) for op, e in sorted(target.device_spec.ops.items())]


def _info(target: Target, op: str) -> OpInfo | None:
    """The op's catalog entry, if it has samples and the installed torch has the op."""
    info = target.spec.op_info(op)
    return info if info is not None and info.samples and op_exists(op) else None


def device_needed(target: Target, op: str) -> str | None:
    """Why ``op`` cannot be called here at all: its Autocast kernel needs the absent device."""
    info = target.spec.op_info(op)
    if info is None or not info.needs_device or not target.policy_only:
        return None
    return (
        f"{op}: its Autocast kernel calls the device runtime (needs_device at {info.loc}); "
        f"it needs a real {target.device} device"
    )


def op_policy(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target):
            info = _info(target, op)
            if info is None or pol is Policy.BANNED:
                continue
            mix = DISCRIMINATING_MIX[pol]
            for i in range(len(info.samples)):
                out.append(Case("op_policy", target.device, dtype, pol.value, op, op, i, mix=mix))
            for ep in info.entry_points:
                out.append(Case("op_policy", target.device, dtype, pol.value, op, ep.name, mix=mix))
    return out


def entry_point_pairs(info: OpInfo) -> list[tuple[str, str]]:
    """``torch.X`` / ``Tensor.X`` entry points of one op taking the same sample."""
    by_name = {ep.name: ep for ep in info.entry_points}
    pairs = []
    for ep in info.entry_points:
        if ep.name.startswith("torch.") and ep.name.count(".") == 1:
            method = "Tensor." + ep.name.split(".", 1)[1]
            other = by_name.get(method)
            if other is not None and other.sample == ep.sample:
                pairs.append((ep.name, method))
    return pairs


def entry_agreement(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target):
            info = _info(target, op)
            if info is None or pol is Policy.BANNED:
                continue
            for fn, method in entry_point_pairs(info):
                mix = DISCRIMINATING_MIX[pol]
                out.append(
                    Case("op_policy", target.device, dtype, pol.value, op, fn, variant=method, mix=mix)
                )
    return out


def numerics(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target):
            info = _info(target, op)
            if info is None or pol is Policy.BANNED:
                continue
            for i in range(len(info.samples)):
                out.append(
                    Case("numerics", target.device, dtype, pol.value, op, op, i, mix=DISCRIMINATING_MIX[pol])
                )
    return out


def eligibility(target: Target) -> list[Case]:
    """Per listed op, the inputs and calls rules.eligibility and rules.out_of_place_only exempt."""
    rules = target.spec.rules
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target):
            info = _info(target, op)
            if info is None:
                continue
            mix = DISCRIMINATING_MIX[pol]
            if pol is not Policy.BANNED:
                for kind, dt in eligibility_dtype_kinds(rules).items():
                    out.append(
                        Case("eligibility", target.device, dtype, pol.value, op, op, variant=kind, mix=(dt,))
                    )
            if rules.eligibility.same_device_only:
                out.append(
                    Case(
                        "eligibility",
                        target.device,
                        dtype,
                        pol.value,
                        op,
                        op,
                        variant="other_device",
                        mix=mix,
                    )
                )
            if not rules.out_of_place_only:
                continue
            ip = inplace_variant(op)
            if ip is not None and same_arguments(op, ip):
                out.append(
                    Case("eligibility", target.device, dtype, pol.value, op, ip, variant="inplace", mix=mix)
                )
            ov = out_variant(op)
            if ov is not None:
                out.append(
                    Case("eligibility", target.device, dtype, pol.value, op, ov, variant="out", mix=mix)
                )
    return out


def same_arguments(op: str, variant: str) -> bool:
    """``variant`` takes the same argument types as ``op`` (``pow_.Scalar`` is not ``pow.Scalar``'s)."""
    from reference_impl.torch_registry import op_schema

    def types(name: str) -> list[str]:
        return [str(a.type) for a in op_schema(name).arguments]

    return types(op) == types(variant)


def registration(target: Target) -> list[Case]:
    registered = autocast_registrations(target.dispatch_key)
    ops = sorted(set(target.device_spec.ops) | registered)
    return [
        Case("registration", target.device, "", (target.device_spec.policy_of(op) or UNLISTED).__str__(), op)
        for op in ops
    ]


def _stable_hash(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


REGISTRY_SAMPLE_MODULUS = 40


def _synthesizable(op: str) -> bool:
    """The schema takes at least one tensor and every required argument can be synthesized."""
    import torch

    try:
        sig = signature(op)
        if sig.mutable or not sig.tensor_slots:
            return False
        synthesize_call(op, lambda i: torch.empty(0))
    except Exception:
        return False
    return True


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
        if _synthesizable(op):
            picked.append(op)
    return tuple(picked)


def unlisted(target: Target) -> list[Case]:
    """Ops the device does not list: catalog ops (listed elsewhere) and a registry sample."""
    listed = frozenset(target.device_spec.ops)
    out = []
    catalog = [op for op in sorted(target.spec.ops) if op not in listed and _info(target, op)]
    watch = [
        op
        for op in target.spec.rules.unlisted_watchlist
        if op not in listed and op not in target.spec.ops and _synthesizable(op)
    ]
    sampled = [op for op in registry_sample(target.dispatch_key, listed) if op not in target.spec.ops]
    sampled = sorted(set(sampled) | set(watch))
    for dtype in target.dtypes:
        for op in catalog:
            for d in ("float32", "lower"):
                out.append(
                    Case(UNLISTED, target.device, dtype, UNLISTED, op, op, variant=f"{d}_in", mix=(d,))
                )
        for op in sampled:
            for d in ("float32", "lower"):
                out.append(
                    Case(
                        UNLISTED, target.device, dtype, UNLISTED, op, op, variant=f"registry-{d}_in", mix=(d,)
                    )
                )
    return out


def promote(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op in target.device_spec.ops_with(Policy.PROMOTE):
            info = _info(target, op)
            if info is None:
                continue
            many = count_test_floats(info.samples[0]) > 1
            for name, mix in PROMOTE_MIXES.items():
                if len(mix) > 1 and not many:
                    continue
                out.append(Case("promote", target.device, dtype, "promote", op, op, variant=name, mix=mix))
    return out


def banned(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op in target.device_spec.ops_with(Policy.BANNED):
            if _info(target, op) is None:
                continue
            out.append(Case("banned", target.device, dtype, "banned", op, op, mix=("float32",)))
    return out


def _has_optional_dtype(op: str) -> bool:
    try:
        return any(s.kind is SlotKind.OPTIONAL_DTYPE for s in signature(op).slots)
    except Exception:
        return False


def opt_dtype(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op in target.device_spec.ops_with(Policy.FP32_SET_OPT_DTYPE):
            if _info(target, op) is None or not _has_optional_dtype(op):
                continue
            out.append(
                Case(
                    "opt_dtype",
                    target.device,
                    dtype,
                    "fp32_set_opt_dtype",
                    op,
                    op,
                    variant="explicit_dtype",
                    mix=("lower",),
                )
            )
    return out


def autograd(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target):
            if pol not in (Policy.LOWER_PRECISION_FP, Policy.FP32):
                continue
            if _info(target, op) is None:
                continue
            out.append(Case("autograd", target.device, dtype, pol.value, op, op, mix=DISCRIMINATING_MIX[pol]))
    return out


def probe_op(target: Target, policy: Policy = Policy.LOWER_PRECISION_FP) -> str | None:
    """The first op (by name) of ``policy`` with samples of at least two test-float tensors,
    else one: the op context and cache tests watch to see whether autocast is on."""
    ops = [op for op in target.device_spec.ops_with(policy) if _info(target, op)]
    for op in ops:
        if count_test_floats(target.spec.ops[op].samples[0]) > 1:
            return op
    return ops[0] if ops else None

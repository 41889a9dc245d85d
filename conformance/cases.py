"""Spec -> test cases: from a :class:`Target` to parametrization.

Each category has a generator returning :class:`Case` objects. The generators read
the spec (through the target) and ask the installed torch's dispatcher which ops
exist, which have Autocast kernels, in-place and ``out=`` variants or an optional
dtype argument (:mod:`reference_impl.torch_registry`, :mod:`conformance.op_facts`);
they change nothing, and the same spec on the same torch gives the same cases in the
same order (so pytest-xdist workers agree). :mod:`conformance.registry` names them,
with the categories they belong to and the coverage every listed op owes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from autocast_spec.catalog import OpInfo
from autocast_spec.model import Policy, Rules
from reference_impl.dtypes import NON_FLOATING
from reference_impl.torch_registry import autocast_registrations, inplace_variant, op_exists, out_variant

from .op_facts import has_optional_dtype, registry_sample, same_arguments, synthesizable, takes_arguments_of
from .runner import Mix, count_test_floats
from .target import Target

UNLISTED = "unlisted"
REGISTRY = "registry"  # the kind of an unlisted case whose op comes from the registry sample


@dataclass(frozen=True)
class Case:
    """One generated test: what to call, on which dtype, and why."""

    category: str
    device: str
    dtype: str = ""  # the lower dtype under test ("" where none applies)
    policy: str = ""
    op: str = ""
    entry: str = ""  # the entry point called (torch.mm, Tensor.mm, an in-place overload), or the op
    sample: int = 0
    method: str = ""  # entry agreement: the Tensor method whose result must equal entry's
    kind: str = ""  # which check of the category: eligibility kind, cache scenario, transform...
    inputs: str = ""  # the name of the input mix, where the category has several (promote, unlisted)
    mix: Mix = ()
    seed: int = 0  # the values' seed (Hypothesis draws it)

    @property
    def variant(self) -> str:
        """The id's trailing label, for display: method, kind and inputs, joined by ``-``."""
        return "-".join(p for p in (self.method, self.kind, self.inputs) if p)

    @property
    def id(self) -> str:
        parts = [self.device, self.dtype, self.policy, self.op]
        if self.entry and self.entry != self.op:
            parts.append(self.entry)
        if self.sample:
            parts.append(f"sample{self.sample}")
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
    Policy.LOWER_FIRST_ARG: ("float32",),
    Policy.BANNED: ("float32",),
}

PROMOTE_MIXES: dict[str, Mix] = {
    "lower+float32": ("lower", "float32"),
    "float32+lower": ("float32", "lower"),
    "all_lower": ("lower",),
    "all_float32": ("float32",),
    "lower+float64": ("lower", "float64"),
}

# The eligibility checks about where or how the op is called (not its input dtypes).
OTHER_DEVICE, INPLACE, OUT = "other_device", "inplace", "out"
ELIGIBILITY_CALL_KINDS = (OTHER_DEVICE, INPLACE, OUT)


@dataclass(frozen=True)
class EligibilityKind:
    """Inputs or a call a rule says autocast leaves alone; ``name`` is the case's ``kind``."""

    name: str
    rule: str  # the rules.yaml field that demands it
    dtype: str = ""  # a dtype kind: every test-float tensor gets it; "" for a call kind


def eligibility_kinds(rules: Rules) -> tuple[EligibilityKind, ...]:
    """What rules.eligibility and rules.out_of_place_only exempt: each never_cast dtype, the
    non-floating dtypes under floating_only, tensors of another device under same_device_only,
    in-place and out= calls under out_of_place_only."""
    el = rules.eligibility
    kinds = [EligibilityKind(d, "eligibility.never_cast", d) for d in el.never_cast]
    if el.floating_only:
        kinds += [EligibilityKind(d, "eligibility.floating_only", d) for d in NON_FLOATING]
    if el.same_device_only:
        kinds.append(EligibilityKind(OTHER_DEVICE, "eligibility.same_device_only"))
    if rules.out_of_place_only:
        kinds += [EligibilityKind(k, "out_of_place_only") for k in (INPLACE, OUT)]
    return tuple(kinds)


def other_device(device: str) -> str:
    """A device type whose tensors the backend's autocast must not touch."""
    return "cpu" if device != "cpu" else "meta"


def _listed(target: Target, dtype: str | None = None) -> list[tuple[str, Policy]]:
    """The listed ops with their policy: under ``dtype`` when given (``by_dtype``; an op that
    passes uncast under it is left out), else the policy they are listed under."""
    ops = sorted(target.device_spec.ops.items())
    if dtype is None:
        return [(op, e.policy) for op, e in ops]
    return [(op, p) for op, e in ops if (p := e.policy_under(dtype)) is not None]


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
        for op, pol in _listed(target, dtype):
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
        for op, pol in _listed(target, dtype):
            info = _info(target, op)
            if info is None or pol is Policy.BANNED:
                continue
            for fn, method in entry_point_pairs(info):
                mix = DISCRIMINATING_MIX[pol]
                out.append(Case("op_policy", target.device, dtype, pol.value, op, fn, method=method, mix=mix))
    return out


def numerics(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target, dtype):
            info = _info(target, op)
            if info is None or pol is Policy.BANNED:
                continue
            for i in range(len(info.samples)):
                out.append(
                    Case("numerics", target.device, dtype, pol.value, op, op, i, mix=DISCRIMINATING_MIX[pol])
                )
    return out


def _eligibility_entry(op: str, pol: Policy, kind: EligibilityKind) -> str | None:
    """What a case of ``kind`` calls for ``op``; None where the kind has nothing to call."""
    if kind.dtype:
        return None if pol is Policy.BANNED else op  # a banned op raises whatever its inputs
    if kind.name == INPLACE:
        ip = inplace_variant(op)
        return ip if ip is not None and same_arguments(op, ip) else None
    if kind.name == OUT:
        ov = out_variant(op)
        return ov if ov is not None and takes_arguments_of(op, ov) else None
    return op


def eligibility(target: Target) -> list[Case]:
    """Per listed op, each of :func:`eligibility_kinds` the op can be called for."""
    kinds = eligibility_kinds(target.spec.rules)
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target, dtype):
            if _info(target, op) is None:
                continue
            for kind in kinds:
                entry = _eligibility_entry(op, pol, kind)
                if entry is not None:
                    mix = (kind.dtype,) if kind.dtype else DISCRIMINATING_MIX[pol]
                    out.append(
                        Case(
                            "eligibility", target.device, dtype, pol.value, op, entry, kind=kind.name, mix=mix
                        )
                    )
    return out


def eligibility_kinds_without_cases(target: Target, cases: list[Case]) -> list[EligibilityKind]:
    """The kinds the rules demand that none of ``cases`` (the eligibility cases) checks."""
    made = {c.kind for c in cases}
    return [k for k in eligibility_kinds(target.spec.rules) if k.name not in made]


def registration(target: Target) -> list[Case]:
    registered = autocast_registrations(target.dispatch_key)
    ops = sorted(set(target.device_spec.ops) | registered)
    return [
        Case("registration", target.device, "", (target.device_spec.policy_of(op) or UNLISTED).__str__(), op)
        for op in ops
    ]


def unlisted(target: Target) -> list[Case]:
    """Ops the device does not list: catalog ops (listed elsewhere) and a registry sample."""
    listed = frozenset(target.device_spec.ops)
    out = []
    catalog = [op for op in sorted(target.spec.ops) if op not in listed and _info(target, op)]
    watch = [
        op
        for op in target.spec.rules.unlisted_watchlist
        if op not in listed and op not in target.spec.ops and synthesizable(op)
    ]
    sampled = [op for op in registry_sample(target.dispatch_key, listed) if op not in target.spec.ops]
    sampled = sorted(set(sampled) | set(watch))
    for dtype in target.dtypes:
        for kind, ops in (("", catalog), (REGISTRY, sampled)):
            for op in ops:
                for d in ("float32", "lower"):
                    out.append(
                        Case(
                            UNLISTED,
                            target.device,
                            dtype,
                            UNLISTED,
                            op,
                            op,
                            kind=kind,
                            inputs=f"{d}_in",
                            mix=(d,),
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
                out.append(Case("promote", target.device, dtype, "promote", op, op, inputs=name, mix=mix))
    return out


def banned(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op in target.device_spec.ops_with(Policy.BANNED):
            if _info(target, op) is None:
                continue
            out.append(Case("banned", target.device, dtype, "banned", op, op, mix=("float32",)))
    return out


def opt_dtype(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op in target.device_spec.ops_with(Policy.FP32_SET_OPT_DTYPE):
            if _info(target, op) is None or not has_optional_dtype(op):
                continue
            out.append(
                Case(
                    "opt_dtype",
                    target.device,
                    dtype,
                    "fp32_set_opt_dtype",
                    op,
                    op,
                    kind="explicit_dtype",
                    mix=("lower",),
                )
            )
    return out


def autograd(target: Target) -> list[Case]:
    out = []
    for dtype in target.dtypes:
        for op, pol in _listed(target, dtype):
            if pol not in (Policy.LOWER_PRECISION_FP, Policy.FP32):
                continue
            if _info(target, op) is None:
                continue
            out.append(Case("autograd", target.device, dtype, pol.value, op, op, mix=DISCRIMINATING_MIX[pol]))
    return out


def sentinel_op(target: Target, policy: Policy = Policy.LOWER_PRECISION_FP) -> str | None:
    """The first op (by name) of ``policy`` with samples of at least two test-float tensors,
    else one: the op context and cache tests watch to see whether autocast is on."""
    ops = [op for op in target.device_spec.ops_with(policy) if _info(target, op)]
    for op in ops:
        if count_test_floats(target.spec.ops[op].samples[0]) > 1:
            return op
    return ops[0] if ops else None

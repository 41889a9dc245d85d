"""Probe the installed torch's autocast for one device and describe it as a spec.

Everything the probe writes is observed in this process, except where the
device cannot be observed here; those facts are taken from the bundled spec and
listed in :attr:`ProbedDevice.borrowed` (the YAML header names them too):

- op registrations: always observed (the dispatcher's table for the Autocast key);
- op policies and banned messages: observed through
  :func:`~reference_impl.probe.observe.observe_device` (FakeTensors off-device).
  On MAIA FakeTensors carry no Autocast key: each op MAIA registers gets the
  policy observed on the device MAIA's bundled spec ``extends`` (MTIA), noted
  per entry; without such a device, the bundled spec's policy;
- default dtype: ``torch.get_autocast_dtype(device)``;
- supported dtypes and the unsupported-dtype rule: by constructing
  ``torch.autocast(device, dtype=...)`` for float16, bfloat16 and float32 and
  recording whether it disables itself and with which warning. CUDA's
  constructor disables itself on a machine without a GPU before checking the
  dtype, so there they are borrowed.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from autocast_spec.common import SourceLoc, frozen_map
from autocast_spec.model import DeviceSpec, OpPolicy, Policy, UnsupportedDtypeRule

from ..engine.dtypes import dtype_name, dtype_of
from ..engine.torch_registry import installed_torch_version, parse_release
from .observe import DeviceObservation, observe_device
from .render import ObservedPolicy, device_data, device_yaml

Progress = Callable[[int, int, str], None]

_CANDIDATE_DTYPES = (torch.float16, torch.bfloat16)
_UNSUPPORTED_PROBE = torch.float32


class ProbeError(Exception):
    """The device cannot be probed at all (unknown to torch, no Autocast key)."""


def dispatch_key_for(device: str) -> str:
    """``cuda`` -> ``AutocastCUDA``; ``privateuse1`` -> ``AutocastPrivateUse1``."""
    if device in ("privateuse1", "privateuseone", torch._C._get_privateuse1_backend_name()):
        return "AutocastPrivateUse1"
    return "Autocast" + device.upper()


def torch_device_type(device: str) -> str:
    return "privateuseone" if device == "privateuse1" else device


def check_probeable(device: str) -> None:
    """Raise :class:`ProbeError` (one line) unless torch knows ``device`` as an autocast device."""
    try:
        available = torch.amp.is_autocast_available(torch_device_type(device))
    except RuntimeError as e:
        first = str(e).splitlines()[0]
        raise ProbeError(f"torch does not know device {device!r}: {first}") from None
    if not available:
        raise ProbeError(f"torch has no autocast for device {device!r}")
    if device in ("privateuse1", "privateuseone"):
        name = torch._C._get_privateuse1_backend_name()
        if not hasattr(torch, name):
            raise ProbeError(
                f"no PrivateUse1 backend is loaded (torch.{name} does not exist); import your "
                "backend's module first, and probe it by its own name"
            )


def version_range(version: str) -> str:
    """``2.13.0`` -> ``>=2.13,<2.14``: the minor release the probe saw."""
    major, minor, _ = parse_release(version)
    return f">={major}.{minor},<{major}.{minor + 1}"


@dataclass(frozen=True)
class DtypeFacts:
    default_dtype: str
    supported_dtypes: tuple[str, ...]
    unsupported_dtype: UnsupportedDtypeRule | None


def _try_autocast(device: str, dtype: torch.dtype) -> tuple[bool, str | None, str | None]:
    """(enabled after construction, first warning line, error line) of torch.autocast(device, dtype)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ctx = torch.autocast(torch_device_type(device), dtype=dtype)
        except Exception as e:
            return False, None, str(e).splitlines()[0]
    first = str(caught[0].message).splitlines()[0] if caught else None
    return bool(ctx._enabled), first, None


def observe_dtype_facts(device: str) -> tuple[DtypeFacts | None, str]:
    """The dtype defaults and rules, or None and why they cannot be observed here."""
    default = dtype_name(torch.get_autocast_dtype(torch_device_type(device)))
    results = {d: _try_autocast(device, d) for d in (*_CANDIDATE_DTYPES, _UNSUPPORTED_PROBE)}
    if not any(enabled for enabled, _, _ in results.values()):
        reasons = {w or e for _, w, e in results.values()} - {None}
        return None, f"torch.autocast({device!r}) disables itself for every dtype here: " + "; ".join(
            sorted(r for r in reasons if r)
        )
    supported = [dtype_name(d) for d in _CANDIDATE_DTYPES if results[d][0]]
    ordered = tuple([default] + [d for d in supported if d != default])
    enabled, warning, error = results[_UNSUPPORTED_PROBE]
    if error is not None:
        rule = UnsupportedDtypeRule("error", error)
    elif not enabled and warning:
        rule = UnsupportedDtypeRule("warn_and_disable", warning)
    else:
        rule = UnsupportedDtypeRule("accepted", "")
    return DtypeFacts(default, ordered, rule), ""


@dataclass
class ProbedDevice:
    """What the probe found, as a :class:`DeviceSpec` plus provenance notes."""

    spec: DeviceSpec
    torch_version: str
    observation: DeviceObservation
    borrowed: list[str] = field(default_factory=list)  # facts taken from the bundled spec, and why
    unresolved: dict[str, str] = field(default_factory=dict)  # op -> why it has no policy (not_observed)


def probe_device(
    device: str,
    bundled: DeviceSpec | None = None,
    progress: Progress | None = None,
    bundled_from: str = "the bundled spec",
    every_dtype: bool = False,
) -> ProbedDevice:
    """Probe ``device`` in the installed torch. ``bundled`` fills what cannot be observed here.

    ``bundled_from`` names ``bundled`` in the notes (which release it was read for).
    ``every_dtype``: observe each op under every supported lower dtype, not only the default
    one; where the policy differs, the entry says so (``by_dtype``; IPEX's kernels).
    """
    check_probeable(device)
    key = bundled.dispatch_key if bundled else dispatch_key_for(device)
    version = installed_torch_version()
    loc = SourceLoc(f"probe:{device}", 0)
    facts, facts_reason = observe_dtype_facts(device)
    lower = torch.get_autocast_dtype(torch_device_type(device))
    obs = observe_device(device, key, lower, progress=progress)
    borrowed: list[str] = []
    unresolved: dict[str, str] = {}
    ops: dict[str, OpPolicy] = {}

    parent = bundled.extends if bundled else None
    stand_in: DeviceObservation | None = None
    if obs.unobservable_reason and parent:
        stand_in = observe_device(parent, dispatch_key_for(parent), lower, progress=progress)
        if stand_in.unobservable_reason:
            stand_in = None
    if obs.unobservable_reason:
        source = (
            f"each registered op's policy is observed on {parent}, the device it extends"
            if stand_in
            else f"taken from {bundled_from}"
            if bundled
            else "no bundled spec to take them from"
        )
        borrowed.append(f"op policies: {obs.unobservable_reason}; {source}")
    note = f"not observed: policy observed on {parent}" if stand_in else f"not observed: from {bundled_from}"
    for op in sorted(obs.registered):
        o = obs.observations.get(op)
        if o is not None and o.policy is not None:
            ops[op] = OpPolicy(op, o.policy, loc, message=o.message)
            continue
        s = stand_in.observations.get(op) if stand_in else None
        known = bundled.ops.get(op) if bundled and not stand_in else None
        if s is not None and s.policy is not None:
            ops[op] = OpPolicy(op, s.policy, loc, message=s.message, note=note)
        elif known is not None and obs.unobservable_reason:
            ops[op] = OpPolicy(op, known.policy, loc, message=known.message, note=note)
        else:
            why = o.error if o is not None else obs.unobservable_reason
            unresolved[op] = why or "no cast observed"

    if every_dtype and facts is not None and not obs.unobservable_reason:
        _fold_other_dtypes(ops, unresolved, obs, facts, key, progress)
    if facts is None:
        if bundled is None:
            raise ProbeError(
                f"{device}: {facts_reason}, and no bundled spec gives its dtypes: pass --spec FILE, a "
                "device file for it (a vendor's) to take them from"
            )
        borrowed.append(f"dtype defaults and rules: {facts_reason}; taken from {bundled_from}")
        facts = DtypeFacts(bundled.default_dtype, bundled.supported_dtypes, bundled.unsupported_dtype)
    rule = facts.unsupported_dtype
    if rule is not None and rule.action == "accepted" and not rule.message:
        keep = bundled.unsupported_dtype if bundled else None
        message = keep.message if keep and keep.action == "accepted" else "accepted without a check"
        rule = UnsupportedDtypeRule("accepted", message)

    spec = DeviceSpec(
        device=device,
        dispatch_key=key,
        torch_versions=version_range(version),
        default_dtype=facts.default_dtype,
        supported_dtypes=facts.supported_dtypes,
        ops=frozen_map(ops),
        loc=loc,
        builtin=bundled.builtin if bundled else bool(obs.registered),
        extends=None,
        description=bundled.description if bundled else f"{device} autocast ({key}), as probed.",
        unsupported_dtype=rule,
        not_observed=frozen_map(unresolved),
    )
    return ProbedDevice(spec, version, obs, borrowed, unresolved)


def _fold_other_dtypes(
    ops: dict[str, OpPolicy],
    unresolved: dict[str, str],
    obs: DeviceObservation,
    facts: DtypeFacts,
    key: str,
    progress: Progress | None,
) -> None:
    """Observe every registered op under the other supported dtypes too; an op whose policy
    differs gets ``by_dtype`` (None: it passes uncast under that dtype, a cast observed under
    none of them leaves it unresolved)."""
    by_dtype: dict[str, dict[str, Policy | None]] = {op: {facts.default_dtype: None} for op in unresolved}
    for e in ops.values():
        by_dtype[e.op] = {facts.default_dtype: e.policy}
    for other in facts.supported_dtypes:
        if other == facts.default_dtype:
            continue
        seen = observe_device(obs.device, key, dtype_of(other), progress=progress)
        for op in by_dtype:
            o = seen.observations.get(op)
            by_dtype[op][other] = (
                o.policy if o is not None and o.error is None else by_dtype[op][facts.default_dtype]
            )
    for op, policies in by_dtype.items():
        known = [p for p in policies.values() if p is not None]
        if not known:
            continue
        main = policies[facts.default_dtype] or known[0]
        loc = ops[op].loc if op in ops else SourceLoc(f"probe:{obs.device}", 0)
        message = ops[op].message if op in ops else None
        diff = frozen_map({dt: p for dt, p in policies.items() if p is not main})
        ops[op] = OpPolicy(op, main, loc, message=message, by_dtype=diff)
        unresolved.pop(op, None)


def _observed_policies(ops: Mapping[str, OpPolicy]) -> dict[str, ObservedPolicy]:
    return {op: ObservedPolicy(e.policy, e.message, e.note, by_dtype=e.by_dtype) for op, e in ops.items()}


def probed_yaml(probed: ProbedDevice) -> str:
    """The probe as a device spec file in the project's format (flat: no ``extends``)."""
    ds = probed.spec
    header = [
        f"Generated by 'autocast-spec probe --device {ds.device}' from torch {probed.torch_version}.",
        "Each op is listed as the dispatcher names it, under the policy its Autocast kernel applies.",
    ]
    header += [f"NOT OBSERVED: {b}" for b in probed.borrowed]
    header += [f"NO POLICY (under not_observed): {op}: {why}" for op, why in probed.unresolved.items()]
    return device_yaml(ds, _observed_policies(ds.ops), "\n".join(header))


def probed_data(probed: ProbedDevice) -> dict[str, object]:
    """The same content as :func:`probed_yaml`, as plain data (for ``--format json``)."""
    return device_data(probed.spec, _observed_policies(probed.spec.ops))

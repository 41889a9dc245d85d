"""The difference between two autocast specs (or two devices of specs), as data.

Pure functions: :func:`diff_sides` takes two :class:`Side` values (built by the
``diff`` command from a bundled device name, a spec path or a live probe) and
returns a :class:`SpecDiff`; :mod:`reference_impl.spectools.specdiff_render` renders it.
Nothing here knows any op or policy: everything compared comes from the sides.

An op a side registers but could not observe the policy of (a live probe's
unresolved ops) is neither added, removed nor changed: it is listed in
:attr:`SpecDiff.not_observed`, with the reason, and is not a difference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from autocast_spec.common import Tolerance
from autocast_spec.model import DeviceSpec, JitLimitation, Rules, Spec


@dataclass(frozen=True)
class Side:
    """One side of a comparison.

    ``devices`` holds one device (a device comparison) or several (a whole-spec
    comparison, devices paired by name). ``spec`` supplies rules, tolerances and
    JIT limitations; it is None for a live probe, which observes only the device.
    ``unobserved`` (device -> op -> reason) names the ops a live probe found
    registered but could not observe the policy of; ``notes`` are the facts it
    did not observe here and where it took them from. ``registers``: ``devices`` is every
    device the side's source registers (an ``extract:`` side), so a device the other side
    names that is not among them has no registration there: its ops are all removed (or
    added), where with any other side a missing device is a pairing error.
    """

    label: str
    devices: Mapping[str, DeviceSpec]
    spec: Spec | None
    single: bool
    unobserved: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    registers: bool = False

    @property
    def device(self) -> DeviceSpec:
        (only,) = self.devices.values()
        return only


@dataclass(frozen=True)
class OpEntry:
    op: str
    policy: str
    device: str | None = None


@dataclass(frozen=True)
class OpMove:
    op: str
    before: str
    after: str
    device: str | None = None


@dataclass(frozen=True)
class Unobserved:
    """An op ``side`` ("a" or "b") registers, whose policy it could not observe, and why."""

    op: str
    side: str
    reason: str
    device: str | None = None


@dataclass(frozen=True)
class Change:
    """A named value that differs: ``before``/``after`` is None where a side lacks it."""

    key: str
    before: Any
    after: Any
    device: str | None = None


@dataclass(frozen=True)
class SpecDiff:
    a: str
    b: str
    added: tuple[OpEntry, ...] = ()
    removed: tuple[OpEntry, ...] = ()
    changed: tuple[OpMove, ...] = ()
    banned_messages: tuple[Change, ...] = ()
    defaults: tuple[Change, ...] = ()
    supported_added: tuple[Change, ...] = ()  # key: dtype
    supported_removed: tuple[Change, ...] = ()
    devices_added: tuple[str, ...] = ()
    devices_removed: tuple[str, ...] = ()
    rules: tuple[Change, ...] = ()
    tolerances: tuple[Change, ...] = ()
    jit_limitations: tuple[Change, ...] = ()
    not_compared: tuple[str, ...] = ()
    paired: tuple[tuple[str, str], ...] = field(default=())
    not_observed: tuple[Unobserved, ...] = ()  # not differences: see the module docstring
    notes: tuple[tuple[str, str], ...] = ()  # (side, note): facts a side took from elsewhere

    @property
    def identical(self) -> bool:
        """No difference in what both sides observed (ops not observed do not count)."""
        return not any(
            (
                self.added,
                self.removed,
                self.changed,
                self.banned_messages,
                self.defaults,
                self.supported_added,
                self.supported_removed,
                self.devices_added,
                self.devices_removed,
                self.rules,
                self.tolerances,
                self.jit_limitations,
            )
        )


class PairingError(ValueError):
    """The sides cannot be compared (a named device is missing on the other side)."""


# ---------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------


@dataclass
class _Acc:
    added: list[OpEntry] = field(default_factory=list)
    removed: list[OpEntry] = field(default_factory=list)
    changed: list[OpMove] = field(default_factory=list)
    messages: list[Change] = field(default_factory=list)
    defaults: list[Change] = field(default_factory=list)
    sup_added: list[Change] = field(default_factory=list)
    sup_removed: list[Change] = field(default_factory=list)
    not_observed: list[Unobserved] = field(default_factory=list)


def _diff_device(a: Side, b: Side, pair: tuple[DeviceSpec, DeviceSpec], tag: str | None, acc: _Acc) -> None:
    da, db = pair
    # a probe or extract side carries them; a spec file they wrote, in its not_observed
    hidden = {
        "a": {**da.not_observed, **a.unobserved.get(da.device, {})},
        "b": {**db.not_observed, **b.unobserved.get(db.device, {})},
    }
    for side, ops in hidden.items():
        acc.not_observed += [Unobserved(op, side, why, tag) for op, why in sorted(ops.items())]
    _diff_ops(da, db, set(hidden["a"]) | set(hidden["b"]), tag, acc)
    _diff_dtypes(da, db, tag, acc)


REGISTERED_ONLY = "registered, policy not stated"


def _diff_ops(a: DeviceSpec, b: DeviceSpec, hidden: set[str], tag: str | None, acc: _Acc) -> None:
    """Ops added, removed, moved; an op either side could not observe is not compared.

    A spec's ``registered_only`` op is registered with no policy stated: against a side that
    registers it with a policy, that policy is not compared (not observed, with the spec's
    reason); against a side that does not register it, it is added or removed."""
    every = set(a.ops) | set(b.ops) | set(a.registered_only) | set(b.registered_only)
    for op in sorted(every - hidden):
        ea, eb = a.ops.get(op), b.ops.get(op)
        ra, rb = a.registered_only.get(op), b.registered_only.get(op)
        if ea is None and ra is None:
            acc.added.append(OpEntry(op, eb.described if eb is not None else REGISTERED_ONLY, tag))
        elif eb is None and rb is None:
            acc.removed.append(OpEntry(op, ea.described if ea is not None else REGISTERED_ONLY, tag))
        elif ra is not None and rb is not None:
            continue  # registered on both sides, neither states a policy
        elif ra is not None or rb is not None:
            side, why = ("a", ra) if ra is not None else ("b", rb)
            acc.not_observed.append(Unobserved(op, side, f"{REGISTERED_ONLY}: {why}", tag))
        elif ea is not None and eb is not None:
            if ea.described != eb.described:  # the policy, or its exceptions per dtype (by_dtype)
                acc.changed.append(OpMove(op, ea.described, eb.described, tag))
            elif ea.message != eb.message:
                acc.messages.append(Change(op, ea.message, eb.message, tag))


def _diff_dtypes(a: DeviceSpec, b: DeviceSpec, tag: str | None, acc: _Acc) -> None:
    if a.default_dtype != b.default_dtype:
        acc.defaults.append(Change("default_dtype", a.default_dtype, b.default_dtype, tag))
    ua, ub = a.unsupported_dtype, b.unsupported_dtype
    if (ua and ua.action) != (ub and ub.action):
        acc.defaults.append(Change("unsupported_dtype.action", ua and ua.action, ub and ub.action, tag))
    if (ua and ua.message) != (ub and ub.message):
        acc.defaults.append(Change("unsupported_dtype.message", ua and ua.message, ub and ub.message, tag))
    if a.cast_cache != b.cast_cache:
        acc.defaults.append(Change("cast_cache", a.cast_cache, b.cast_cache, tag))
    if a.cast_only_between != b.cast_only_between:
        acc.defaults.append(
            Change(
                "cast_only_between", list(a.cast_only_between) or None, list(b.cast_only_between) or None, tag
            )
        )
    env_a, env_b = [o.variable for o in a.env_overrides], [o.variable for o in b.env_overrides]
    if env_a != env_b:
        acc.defaults.append(Change("env_overrides", env_a, env_b, tag))
    for dt in b.supported_dtypes:
        if dt not in a.supported_dtypes:
            acc.sup_added.append(Change(dt, None, dt, tag))
    for dt in a.supported_dtypes:
        if dt not in b.supported_dtypes:
            acc.sup_removed.append(Change(dt, dt, None, tag))


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and not isinstance(value, (str, int, float, bool)):
        return value.value  # enums
    return value


def _flatten_rules(rules: Rules) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def walk(prefix: str, obj: Any) -> None:
        for f in dataclasses.fields(obj):
            if f.name in ("loc", "default_tolerance"):
                continue
            v = getattr(obj, f.name)
            key = f"{prefix}{f.name}"
            if dataclasses.is_dataclass(v):
                walk(key + ".", v)
            elif isinstance(v, tuple) and v and all(hasattr(x, "id") for x in v):
                for item in v:  # entries with an id (known_bugs): compared per id, field by field
                    walk(f"{key}.{item.id}.", item)
            else:
                out[key] = _plain(v)

    walk("", rules)
    return out


def _tolerances(spec: Spec) -> dict[str, dict[str, float]]:
    def tol(t: Tolerance) -> dict[str, float]:
        return {"atol": t.atol, "rtol": t.rtol}

    out = {f"default/{dt}": tol(t) for dt, t in spec.rules.default_tolerance.items()}
    for op, info in spec.ops.items():
        out.update({f"{op}/{dt}": tol(t) for dt, t in info.tolerance.items()})
    return out


def _limitations(spec: Spec, device: str | None) -> dict[str, str]:
    def applies(lim: JitLimitation) -> bool:
        return device is None or not lim.devices or device in lim.devices

    return {lim.id: f"{lim.mode}: {lim.expect}" for lim in spec.limitations if applies(lim)}


def _diff_maps(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    return [Change(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _pairs(
    a: Side, b: Side
) -> tuple[list[tuple[DeviceSpec, DeviceSpec]], list[str], list[str], DeviceSpec | None]:
    """(pairs, devices added, devices removed, the one device asked for that the other side does
    not register: all its ops are added or removed)."""
    if a.single and b.single:
        return [(a.device, b.device)], [], [], None
    if a.single or b.single:
        one, other = (a, b) if a.single else (b, a)
        name = one.device.device
        if name not in other.devices:
            if other.registers:
                return [], [] if a.single else [name], [name] if a.single else [], one.device
            known = ", ".join(sorted(other.devices))
            raise PairingError(
                f"{other.label} has no device {name!r} to compare with {one.label} (it has: {known})"
            )
        pair = (one.device, other.devices[name])
        return [pair if a.single else (pair[1], pair[0])], [], [], None
    common = sorted(set(a.devices) & set(b.devices))
    return (
        [(a.devices[n], b.devices[n]) for n in common],
        sorted(set(b.devices) - set(a.devices)),
        sorted(set(a.devices) - set(b.devices)),
        None,
    )


def diff_sides(a: Side, b: Side) -> SpecDiff:
    """Everything that differs from ``a`` to ``b``."""
    pairs, dev_added, dev_removed, alone = _pairs(a, b)
    multi = not (a.single or b.single)
    acc = _Acc()
    for da, db in pairs:
        _diff_device(a, b, (da, db), da.device if multi else None, acc)
    if alone is not None:  # asked for, and not registered on the other side: every op goes
        entries = [OpEntry(op, e.described) for op, e in sorted(alone.ops.items())]
        (acc.removed if dev_removed else acc.added).extend(entries)

    rules: list[Change] = []
    tols: list[Change] = []
    lims: list[Change] = []
    not_compared: list[str] = []
    if a.spec is not None and b.spec is not None:
        rules = _diff_maps(_flatten_rules(a.spec.rules), _flatten_rules(b.spec.rules))
        tols = _diff_maps(_tolerances(a.spec), _tolerances(b.spec))
        dev_a = pairs[0][0].device if len(pairs) == 1 and not multi else None
        dev_b = pairs[0][1].device if len(pairs) == 1 and not multi else None
        if alone is not None:
            dev_a = dev_b = alone.device
        lims = _diff_maps(_limitations(a.spec, dev_a), _limitations(b.spec, dev_b))
    else:
        live = a.label if a.spec is None else b.label
        not_compared.append(
            f"rules, tolerances and JIT limitations: {live} observes only the device's op policies "
            "and dtype rules"
        )
    return SpecDiff(
        a=a.label,
        b=b.label,
        added=tuple(acc.added),
        removed=tuple(acc.removed),
        changed=tuple(acc.changed),
        banned_messages=tuple(acc.messages),
        defaults=tuple(acc.defaults),
        supported_added=tuple(acc.sup_added),
        supported_removed=tuple(acc.sup_removed),
        devices_added=tuple(dev_added),
        devices_removed=tuple(dev_removed),
        rules=tuple(rules),
        tolerances=tuple(tols),
        jit_limitations=tuple(lims),
        not_compared=tuple(not_compared),
        paired=tuple((x.device, y.device) for x, y in pairs),
        not_observed=tuple(acc.not_observed),
        notes=tuple(("a", n) for n in a.notes) + tuple(("b", n) for n in b.notes),
    )

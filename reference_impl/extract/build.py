"""The registrations of one Autocast key, merged into one device's op table.

:func:`select` picks the key (``--device``), :func:`assemble` merges its
registrations: an op registered twice with different policies is a problem; an
op under an undecidable ``#if`` keeps its place and is marked (``build: cudnn`` where the
condition is ``AT_CUDNN_ENABLED()``, a note naming the condition otherwise); an op
whose policy cannot be read is listed apart with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autocast_spec.model import Policy

from .conditions import Cond
from .forms import IN_TREE_DEVICES, ByDtype, device_of_key
from .registrations import Registration
from .scan import ExtractError, Scan

PRIVATEUSE1_KEY = "AutocastPrivateUse1"


@dataclass(frozen=True)
class Entry:
    op: str
    policy: Policy
    where: str
    message: str | None = None
    build: str | None = None
    note: str | None = None
    conds: tuple[Cond, ...] = ()  # the undecidable conditions it sits under
    by_dtype: ByDtype = ()  # a vendor's policy under another dtype, where it differs


@dataclass
class Extracted:
    """One device's autocast as the sources state it."""

    device: str
    key: str  # the dispatch key (``Autocast`` written as ``AutocastCUDA``)
    entries: dict[str, Entry] = field(default_factory=dict)
    unresolved: dict[str, str] = field(default_factory=dict)  # op -> why it has no policy
    undecided: list[Cond] = field(default_factory=list)  # conditions that marked entries
    fallthrough_ops: list[str] = field(default_factory=list)
    has_fallback: bool = False


def device_name(key: str, privateuse1: str | None = None) -> str:
    """The device a key registers for; a PrivateUse1 key takes the backend's name when given."""
    return (privateuse1 or "privateuse1") if key == PRIVATEUSE1_KEY else device_of_key(key)


def registered_keys(s: Scan) -> list[str]:
    """The Autocast keys the sources register ops on, in the order first seen."""
    return [k for k in s.found.keys if any(r.key == k for r in s.found.registrations)]


def select(s: Scan, device: str | None) -> tuple[str, str]:
    """(dispatch key, device name) to extract; one line naming the choices when it is not clear."""
    keys = registered_keys(s)
    where = ", ".join(str(p) for p in s.sources)
    if not keys:
        raise ExtractError(
            [f"{where}: no op registered on an Autocast key (TORCH_LIBRARY_IMPL(aten, Autocast...))"]
        )
    choices = ", ".join(f"{device_name(k, None)} ({k})" for k in keys)
    if device is None:
        if len(keys) > 1:
            raise ExtractError(
                [f"{where} registers autocast for several devices: {choices}; pick one with --device"]
            )
        return keys[0], device_name(keys[0], None)
    matching = [k for k in keys if device_of_key(k) == device]
    if not matching and PRIVATEUSE1_KEY in keys and device not in IN_TREE_DEVICES:
        matching = [PRIVATEUSE1_KEY]  # --device names the PrivateUse1 backend
    if not matching:
        why = (
            f" ({device} is a device of torch's own, which a PrivateUse1 backend cannot be named)"
            if PRIVATEUSE1_KEY in keys
            else ""
        )
        raise ExtractError([f"--device {device}: {where} registers autocast only for: {choices}{why}"])
    # plain Autocast and AutocastCUDA are one key
    return matching[0], device_name(matching[0], device)


def _common(regs: list[Registration]) -> tuple[Cond, ...]:
    """The conditions every registration of an op sits under (complementary branches cancel)."""
    first = regs[0].conds
    return tuple(c for c in first if all(c in r.conds for r in regs[1:]))


def _mark(conds: tuple[Cond, ...]) -> tuple[str | None, str | None]:
    """(build feature, note) for an entry under undecidable conditions."""
    if not conds:
        return None, None
    if len(conds) == 1 and conds[0].build:
        return conds[0].build, None
    return None, "registered only when " + " and ".join(
        str(c) for c in conds
    ) + " (undecided: pass -D to decide)"


def assemble(s: Scan, key: str, device: str) -> Extracted:
    """Merge ``key``'s registrations; raises :class:`ExtractError` listing ops registered twice."""
    lines: list[str] = []
    out = Extracted(device, "AutocastCUDA" if key == "Autocast" else key)
    same_key = {key, out.key}
    out.has_fallback = any(f.key in same_key for f in s.found.fallbacks)
    by_op: dict[str, list[Registration]] = {}
    for r in s.found.registrations:
        if r.key in same_key:
            by_op.setdefault(r.op, []).append(r)
    for op, regs in by_op.items():
        kinds = {(r.policy, r.message, r.fallthrough, r.reason, r.by_dtype) for r in regs}
        if len(kinds) > 1:
            places = "; ".join(f"{r.where} ({_what(r)})" for r in regs)
            hint = (
                " under undecidable #if conditions: decide them with -D" if any(r.conds for r in regs) else ""
            )
            lines.append(
                f"{regs[0].where}: {op} is registered on {key} more than once, differently: {places}{hint}"
            )
            continue
        r = regs[0]
        conds = _common(regs)
        out.undecided += [c for c in conds if c not in out.undecided]
        if r.fallthrough:
            out.fallthrough_ops.append(op)
        elif r.policy is None:
            out.unresolved[op] = f"{r.reason} [{r.where}]"
        else:
            build, note = _mark(conds)
            out.entries[op] = Entry(op, r.policy, r.where, r.message, build, note, conds, r.by_dtype)
    if lines:
        raise ExtractError(lines)
    return out


def _what(r: Registration) -> str:
    if r.fallthrough:
        return "fallthrough"
    return r.policy.value if r.policy else "own kernel"

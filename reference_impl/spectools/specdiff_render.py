"""A :class:`~reference_impl.spectools.specdiff.SpecDiff` as JSON data or as a Markdown review comment."""

from __future__ import annotations

import json
from typing import Any

from .specdiff import Change, SpecDiff


def _with_device(d: dict[str, Any], device: str | None) -> dict[str, Any]:
    return {"device": device, **d} if device is not None else d


def to_data(d: SpecDiff) -> dict[str, Any]:
    """The JSON shape (keep it stable): ``{"ops": {"added", "removed", "changed"}, ...}``.

    Added later, beside those keys: ``ops.not_observed`` (``{"op", "side", "reason"}``,
    side "a" or "b") and ``not_observed_notes`` (``{"side", "note"}``).
    """

    def change(c: Change, name: str = "key") -> dict[str, Any]:
        return _with_device({name: c.key, "from": c.before, "to": c.after}, c.device)

    return {
        "a": d.a,
        "b": d.b,
        "identical": d.identical,
        "ops": {
            "added": [_with_device({"op": e.op, "policy": e.policy}, e.device) for e in d.added],
            "removed": [_with_device({"op": e.op, "policy": e.policy}, e.device) for e in d.removed],
            "changed": [
                _with_device({"op": m.op, "from": m.before, "to": m.after}, m.device) for m in d.changed
            ],
            "not_observed": [
                _with_device({"op": u.op, "side": u.side, "reason": u.reason}, u.device)
                for u in d.not_observed
            ],
        },
        "banned_messages": [change(c, "op") for c in d.banned_messages],
        "defaults": [change(c, "field") for c in d.defaults],
        "supported_dtypes": {
            "added": [_with_device({"dtype": c.key}, c.device) for c in d.supported_added],
            "removed": [_with_device({"dtype": c.key}, c.device) for c in d.supported_removed],
        },
        "devices": {"added": list(d.devices_added), "removed": list(d.devices_removed)},
        "rules": [change(c, "field") for c in d.rules],
        "tolerances": [change(c) for c in d.tolerances],
        "jit_limitations": [change(c, "id") for c in d.jit_limitations],
        "not_compared": list(d.not_compared),
        "not_observed_notes": [{"side": side, "note": note} for side, note in d.notes],
    }


def to_json(d: SpecDiff) -> str:
    return json.dumps(to_data(d), indent=2)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(v: Any) -> str:
    if v is None:
        return "—"
    return f"`{_cell(json.dumps(v) if not isinstance(v, str) else v)}`"


def _dev(device: str | None) -> str:
    return f"{device}: " if device else ""


def to_markdown(d: SpecDiff) -> str:
    """A review comment: a summary line, then one table per kind of change."""
    lines = [f"### autocast spec diff: `{d.a}` → `{d.b}`", ""]
    unseen = f"{len(d.not_observed)} ops not observed (not counted as differences)"
    if d.identical:
        lines.append(f"No differences; **{unseen}**." if d.not_observed else "No differences.")
    else:
        counts = [
            (len(d.added), "ops added"),
            (len(d.removed), "ops removed"),
            (len(d.changed), "ops moved between policies"),
            (len(d.defaults) + len(d.supported_added) + len(d.supported_removed), "dtype changes"),
            (len(d.banned_messages), "banned-op messages changed"),
            (len(d.devices_added) + len(d.devices_removed), "devices added/removed"),
            (len(d.rules), "rule changes"),
            (len(d.tolerances), "tolerance changes"),
            (len(d.jit_limitations), "JIT limitation changes"),
        ]
        lines.append("**" + ", ".join(f"{n} {what}" for n, what in counts if n) + "**")
        if d.not_observed:
            lines[-1] += f"; {unseen}"
    op_rows = (
        [f"| added | {_dev(e.device)}`{e.op}` | — | {e.policy} |" for e in d.added]
        + [f"| removed | {_dev(e.device)}`{e.op}` | {e.policy} | — |" for e in d.removed]
        + [f"| moved | {_dev(m.device)}`{m.op}` | {m.before} | {m.after} |" for m in d.changed]
    )
    if op_rows:
        lines += ["", "| change | op | before | after |", "|---|---|---|---|", *op_rows]

    def table(title: str, head: str, rows: list[str]) -> None:
        if rows:
            lines.extend(["", f"**{title}**", "", f"| {head} | before | after |", "|---|---|---|", *rows])

    def rows(changes: tuple[Change, ...]) -> list[str]:
        return [f"| {_dev(c.device)}{c.key} | {_code(c.before)} | {_code(c.after)} |" for c in changes]

    dtype_rows = (
        rows(d.defaults)
        + [f"| {_dev(c.device)}supported_dtypes | — | {_code(c.key)} |" for c in d.supported_added]
        + [f"| {_dev(c.device)}supported_dtypes | {_code(c.key)} | — |" for c in d.supported_removed]
    )
    table("Dtypes", "field", dtype_rows)
    table("Banned-op messages", "op", rows(d.banned_messages))
    table(
        "Devices",
        "device",
        [f"| {n} | — | present |" for n in d.devices_added]
        + [f"| {n} | present | — |" for n in d.devices_removed],
    )
    table("Rules", "field", rows(d.rules))
    table("Tolerances", "op/dtype", rows(d.tolerances))
    table("JIT limitations", "id", rows(d.jit_limitations))
    label = {"a": d.a, "b": d.b}
    if d.not_observed:
        lines += [
            "",
            "**Not observed** (registered for autocast, but the side could not observe the policy; "
            "neither added nor removed)",
            "",
            "| side | op | reason |",
            "|---|---|---|",
            *(f"| {label[u.side]} | {_dev(u.device)}`{u.op}` | {_cell(u.reason)} |" for u in d.not_observed),
        ]
    for side, note in d.notes:
        lines += ["", f"_Not observed on {label[side]}: {note}._"]
    for note in d.not_compared:
        lines += ["", f"_Not compared: {note}._"]
    return "\n".join(lines) + "\n"

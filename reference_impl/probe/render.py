"""Write a device spec (as observed) in the project's own YAML format."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autocast_spec.model import POLICY_ORDER, DeviceSpec, Policy


@dataclass(frozen=True)
class ObservedPolicy:
    policy: Policy
    message: str | None = None
    note: str | None = None
    build: str | None = None  # a build feature the entry holds only in (``build:``)
    by_dtype: Mapping[str, Policy | None] = field(default_factory=dict)  # the policy under another dtype


def _extra(o: ObservedPolicy) -> dict[str, str]:
    """The fields of an entry beyond its name, in the order the file writes them."""
    return {k: v for k, v in (("build", o.build), ("message", o.message), ("note", o.note)) if v}


def _by_dtype_text(o: ObservedPolicy) -> str:
    """``by_dtype: {float16: fp32, bfloat16: none}``, or "" when the policy is the same under every dtype."""
    if not o.by_dtype:
        return ""
    inner = ", ".join(f"{dt}: {p.value if p else 'none'}" for dt, p in sorted(o.by_dtype.items()))
    return f"by_dtype: {{{inner}}}"


def _quote(s: str) -> str:
    # JSON strings are valid YAML double-quoted scalars.
    return json.dumps(s, ensure_ascii=False)


def render_device_yaml(
    *,
    device: str,
    dispatch_key: str,
    torch_versions: str,
    default_dtype: str,
    supported_dtypes: Sequence[str],
    ops: Mapping[str, ObservedPolicy],
    builtin: bool,
    description: str,
    unsupported_dtype: tuple[str, str] | None = None,
    schema_ref: str = "autocast-spec.schema.json",
    header: str = "",
    not_observed: Mapping[str, str] | None = None,
) -> str:
    lines = [f"# yaml-language-server: $schema={schema_ref}"]
    lines += [f"# {h}" if h else "#" for h in header.splitlines()]
    lines += [
        "kind: device",
        f"device: {device}",
        f"dispatch_key: {dispatch_key}",
        f"builtin: {'true' if builtin else 'false'}",
        f"torch: {_quote(torch_versions)}",
        f"description: {_quote(description)}",
        f"default_dtype: {default_dtype}",
        f"supported_dtypes: [{', '.join(supported_dtypes)}]",
    ]
    if unsupported_dtype:
        action, message = unsupported_dtype
        lines += ["unsupported_dtype:", f"  action: {action}", f"  message: {_quote(message)}"]
    lines.append("ops:")
    for policy in POLICY_ORDER:
        names = sorted(op for op, o in ops.items() if o.policy is policy)
        if not names:
            continue
        lines.append(f"  {policy.value}:")
        for op in names:
            extra = _extra(ops[op])
            by_dtype = _by_dtype_text(ops[op])
            if extra or by_dtype:
                parts = [f"op: {op}"] + [f"{k}: {v if k == 'build' else _quote(v)}" for k, v in extra.items()]
                lines.append("    - {" + ", ".join(parts + ([by_dtype] if by_dtype else [])) + "}")
            else:
                lines.append(f"    - {op}")
    if not_observed:
        lines.append("not_observed:")
        lines += [f"  {op}: {_quote(why)}" for op, why in sorted(not_observed.items())]
    return "\n".join(lines) + "\n"


def device_yaml(ds: DeviceSpec, ops: Mapping[str, ObservedPolicy], header: str) -> str:
    """A flat device spec file for ``ds``, its entries as ``ops`` describes them."""
    ud = ds.unsupported_dtype
    return render_device_yaml(
        device=ds.device,
        dispatch_key=ds.dispatch_key,
        torch_versions=ds.torch_versions,
        default_dtype=ds.default_dtype,
        supported_dtypes=ds.supported_dtypes,
        ops=ops,
        builtin=ds.builtin,
        description=ds.description,
        unsupported_dtype=(ud.action, ud.message) if ud else None,
        header=header,
        not_observed=ds.not_observed,
    )


def device_data(ds: DeviceSpec, ops: Mapping[str, ObservedPolicy]) -> dict[str, object]:
    """The same content as :func:`device_yaml`, as plain data (``--format json``)."""
    by_policy: dict[str, list[object]] = {}
    for policy in POLICY_ORDER:
        names = sorted(op for op, o in ops.items() if o.policy is policy)
        if names:
            by_policy[policy.value] = [{"op": op, **x} if (x := _extra(ops[op])) else op for op in names]
    out: dict[str, object] = {
        "kind": "device",
        "device": ds.device,
        "dispatch_key": ds.dispatch_key,
        "builtin": ds.builtin,
        "torch": ds.torch_versions,
        "description": ds.description,
        "default_dtype": ds.default_dtype,
        "supported_dtypes": list(ds.supported_dtypes),
    }
    if ds.unsupported_dtype:
        ud = ds.unsupported_dtype
        out["unsupported_dtype"] = {"action": ud.action, "message": ud.message}
    out["ops"] = by_policy
    if ds.not_observed:
        out["not_observed"] = dict(sorted(ds.not_observed.items()))
    return out

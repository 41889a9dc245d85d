"""Write a device spec (as observed) in the project's own YAML format."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autocast_spec.model import POLICY_ORDER, Policy


@dataclass(frozen=True)
class ObservedPolicy:
    policy: Policy
    message: str | None = None
    note: str | None = None


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
            o = ops[op]
            if o.message or o.note:
                parts = [f"op: {op}"]
                if o.message:
                    parts.append(f"message: {_quote(o.message)}")
                if o.note:
                    parts.append(f"note: {_quote(o.note)}")
                lines.append("    - {" + ", ".join(parts) + "}")
            else:
                lines.append(f"    - {op}")
    return "\n".join(lines) + "\n"

"""The cross-backend matrix: the built-in cuda and cpu beside the out-of-tree vendor specs.

Each vendor file of ``spec/vendors/`` is loaded on its own (overlaid on the bundled
spec, as ``--spec`` does) for the torch releases its vendor release pairs with, so IPEX's
``cpu`` stands beside PyTorch's. Two tables:
:func:`counts_table` (ops per policy, and the device-wide rules; for the README) and
:func:`ops_table` (every op some column lists and not all list alike; for
docs/spec-diff.md). Nothing here names an op or a vendor: both come from the files.
The tables describe the files as written: run without the variables of a vendor's
``env_overrides`` set (set, they would replace that vendor's lists).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autocast_spec.files import vendor_spec_dir
from autocast_spec.model import POLICY_ORDER, DeviceSpec
from autocast_spec.yaml_source import read_yaml

from .installed_spec import load_installed_spec

BUILTIN_COLUMNS = ("cuda", "cpu")


@dataclass(frozen=True)
class Column:
    label: str
    spec: DeviceSpec


def vendor_files() -> list[Path]:
    return sorted(vendor_spec_dir().glob("*.yaml"))


def columns(torch_version: str | None = None) -> list[Column]:
    bundled = load_installed_spec(torch_version=torch_version, check_registry=False)
    out = [Column(name, bundled.devices[name]) for name in BUILTIN_COLUMNS]
    for f in vendor_files():
        device = str(read_yaml(f, str(f)).data["device"])
        # each vendor file is read for the torch releases its vendor release pairs with
        spec = load_installed_spec([f], check_registry=False)
        out.append(Column(f"{device} ({f.stem})", spec.devices[device]))
    return out


def _row(name: str, cells: Sequence[object]) -> str:
    return f"| {name} | " + " | ".join(str(c) for c in cells) + " |"


def counts_table(cols: Sequence[Column]) -> str:
    lines = [_row("", [c.label for c in cols]), "|---|" + "---|" * len(cols)]
    for policy in POLICY_ORDER:
        n = [sum(e.policy is policy for e in c.spec.ops.values()) for c in cols]
        if any(n):
            lines.append(_row(f"`{policy.value}`", n))
    by_dtype = [sum(bool(e.by_dtype) for e in c.spec.ops.values()) for c in cols]
    lines.append(_row("policy depends on the dtype", by_dtype))
    lines.append(_row("own operators, policy not stated", [len(c.spec.registered_only) for c in cols]))
    releases = [f"{c.spec.vendor.described}, torch `{c.spec.torch_versions}`" if c.spec.vendor else
                f"torch `{c.spec.torch_versions}`" for c in cols]  # fmt: skip
    lines.append(_row("release described", releases))
    lines.append(_row("default dtype", [c.spec.default_dtype for c in cols]))
    lines.append(_row("weight-cast cache", ["yes" if c.spec.cast_cache else "**no**" for c in cols]))
    pairs = [" ↔ ".join(c.spec.cast_only_between) if c.spec.cast_only_between else "any" for c in cols]
    lines.append(_row("casts between", pairs))
    env = [", ".join(f"`{o.variable}`" for o in c.spec.env_overrides) or "—" for c in cols]
    lines.append(_row("lists replaced by", env))
    return "\n".join(lines)


def ops_table(cols: Sequence[Column]) -> str:
    ops = sorted({op for c in cols for op in c.spec.ops})
    lines = [_row("op", [c.label for c in cols]), "|---|" + "---|" * len(cols)]
    for op in ops:
        cells = [c.spec.ops[op].described if op in c.spec.ops else "—" for c in cols]
        if len(set(cells)) > 1:
            lines.append(_row(f"`{op}`", cells))
    return "\n".join(lines)


def block(table: str, torch_version: str, what: str) -> str:
    return (
        f"Generated from spec/*.yaml and spec/vendors/*.yaml for torch {torch_version} by "
        f"`python -m reference_impl.cli.vendor_tables{what}`; do not edit by hand.\n\n{table}\n"
    )

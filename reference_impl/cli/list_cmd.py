"""``autocast-spec list --device D [--format json|yaml|table]``: one device's resolved policy."""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

from autocast_spec.model import POLICY_ORDER, Spec

from .common import EXIT_OK, add_spec_option, device_or_fail, load_or_fail, write_out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list",
        help="print one device's op policies after inheritance",
        description="Print a device's resolved spec for the installed torch.",
    )
    p.add_argument("--device", required=True, help="device name, e.g. cpu, cuda, xpu")
    p.add_argument("--format", choices=["json", "yaml", "table"], default="table")
    add_spec_option(p)
    p.set_defaults(run=run)


def device_listing(spec: Spec, device: str) -> dict[str, Any]:
    """The JSON shape other tools read (keep it stable)."""
    d = spec.devices[device]
    return {
        "device": device,
        "torch": spec.torch_version,
        "default_dtype": d.default_dtype,
        "supported_dtypes": list(d.supported_dtypes),
        "ops": d.policy_table(),
        "jit_limitations": [
            {"id": lim.id, "mode": lim.mode, "expect": lim.expect}
            for lim in spec.limitations
            if not lim.devices or device in lim.devices
        ],
    }


def render_table(listing: dict[str, Any]) -> str:
    ops: dict[str, str] = listing["ops"]
    lines = [
        f"device {listing['device']} (torch {listing['torch']}): default {listing['default_dtype']}, "
        f"supported {', '.join(listing['supported_dtypes'])}; {len(ops)} ops",
    ]
    width = max((len(o) for o in ops), default=10)
    for policy in POLICY_ORDER:
        names = [o for o, p in ops.items() if p == policy.value]
        if names:
            lines.append("")
            lines.append(f"{policy.value} ({len(names)})")
            lines.extend(f"  {o:<{width}}" for o in names)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    spec = load_or_fail(args.spec, args.torch_version)
    device_or_fail(spec, args.device)
    listing = device_listing(spec, args.device)
    if args.format == "json":
        write_out(json.dumps(listing, indent=2))
    elif args.format == "yaml":
        write_out(yaml.safe_dump(listing, sort_keys=False))
    else:
        write_out(render_table(listing))
    return EXIT_OK

"""``autocast-spec validate [PATH ...]``: check spec files; exit 0 when valid, 2 otherwise."""

from __future__ import annotations

import argparse
from pathlib import Path

from autocast_spec.problems import SpecError

from ..spectools.installed_spec import load_installed_spec
from .common import EXIT_OK, UsageError, write_out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate",
        help="check spec files against the schema and the installed torch",
        description="Validate spec files (default: the bundled spec). Exit 0 when valid; "
        "otherwise print one line per problem (file:line: what) and exit 2.",
    )
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="spec files or directories")
    p.add_argument("--torch-version", metavar="X.Y", help="validate for this torch version")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        spec = load_installed_spec(args.paths or None, torch_version=args.torch_version)
    except SpecError as e:
        raise UsageError(*(str(p) for p in e.problems)) from None
    devices = ", ".join(f"{d} ({len(ds.ops)} ops)" for d, ds in spec.devices.items())
    write_out(
        f"ok: {len(spec.files)} files valid for torch {spec.torch_version}; devices: {devices}; "
        f"{len(spec.ops)} ops with samples; {len(spec.limitations)} JIT limitations"
    )
    return EXIT_OK

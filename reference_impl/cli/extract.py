"""``autocast-spec extract SOURCE...``: the autocast registrations in C++ source, as a device spec.

For reviewing a change to ``aten/src/ATen/autocast_mode.cpp`` (or a vendor's
registrations) without building it: the file it writes is what ``probe`` would
write for that build, as far as the source states it, and ``diff`` takes
``extract:PATH`` as a side.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from autocast_spec.model import DeviceSpec

from ..engine.torch_registry import installed_torch_version
from ..extract.api import ExtractError, extract
from ..extract.output import to_json, to_yaml, write
from .common import EXIT_OK, UsageError, write_out
from .diff import resolve_side


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "extract",
        help="read autocast registrations from C++ source and write them as a device spec",
        description="Read the Autocast registrations in SOURCE (files, or trees whose *.cpp, *.cc, *.h, "
        "*.hpp files are scanned): TORCH_LIBRARY_IMPL(aten, Autocast<Key>, m) blocks, the KERNEL* "
        "macros, the AT_FORALL_* lists of ATen/autocast_mode.h (from the tree, else from the installed "
        "torch), banned ops and fallthrough fallbacks; write the device spec they state. A form it "
        "does not understand is an error naming file and line (exit 2); #if conditions it cannot "
        "decide are reported and the ops under them marked, never dropped.",
    )
    p.add_argument("sources", nargs="+", type=Path, metavar="SOURCE", help="a C++ file or a source tree")
    p.add_argument(
        "--device",
        help="the device to extract when SOURCE registers several (a PrivateUse1 block: the backend's name)",
    )
    p.add_argument("--format", choices=["yaml", "json"], default="yaml")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of stdout")
    p.add_argument(
        "-D",
        dest="defines",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="define a macro, as the compiler would, to decide #if blocks (repeatable; "
        "-D 'AT_CUDNN_ENABLED()=1')",
    )
    p.add_argument(
        "--header",
        type=Path,
        metavar="PATH",
        help="the ATen/autocast_mode.h to read when SOURCE holds none (default: the installed torch's)",
    )
    p.add_argument(
        "--dtypes-from",
        metavar="DEVICE",
        help="the bundled device whose dtype defaults the spec takes (default: the device itself; "
        "privateuse1 for a PrivateUse1 block)",
    )
    p.add_argument(
        "--spec",
        type=Path,
        metavar="FILE",
        help="a vendor's device file: its vendor.source_forms say how the vendor's C++ spells its "
        "registrations, and the extracted device takes its name and dtype defaults "
        "(e.g. spec/vendors/ipex.yaml for IPEX's csrc/cpu/autocast/autocast_mode.cpp)",
    )
    p.add_argument(
        "--torch-version", metavar="X.Y", help="the release the spec describes (default: the installed)"
    )
    p.set_defaults(run=run)


def one_device_file(path: Path) -> DeviceSpec:
    """The one device of the spec file ``--spec`` names (a directory or a bundled name is refused),
    read for a torch release it describes: with ``--torch-version`` outside its range its dtype
    defaults and forms are taken all the same, and a note says so (as for a bundled vendor file)."""
    side = resolve_side(str(path), None) if path.is_file() else None
    if side is None or not side.single:
        raise UsageError(f"--spec {path}: name one device's spec file (e.g. spec/vendors/ipex.yaml)")
    return side.device


def run(args: argparse.Namespace) -> int:
    version = args.torch_version or installed_torch_version()
    vendor = one_device_file(args.spec) if args.spec else None
    if vendor is not None and args.dtypes_from:
        raise UsageError("--spec FILE gives the dtype defaults: leave out --dtypes-from")
    try:
        (out,) = extract(
            args.sources,
            version,
            device=args.device or (vendor.device if vendor is not None else None),
            defines=args.defines,
            dtypes_from=args.dtypes_from,
            header=args.header,
            forms=vendor.vendor.source_forms if vendor is not None and vendor.vendor is not None else None,
            dtypes_of=(vendor, str(args.spec)) if vendor is not None else None,
        )
    except ExtractError as e:
        raise UsageError(*e.lines) from None
    if vendor is not None and not args.torch_version:  # the vendor file's release range
        spec = dataclasses.replace(out.spec, torch_versions=vendor.torch_versions)
        out = dataclasses.replace(out, spec=spec)
    for w in out.warnings:
        sys.stderr.write(w + "\n")
    text = to_json(out) if args.format == "json" else to_yaml(out)
    if args.output:
        try:
            write(text, args.output)
        except OSError as e:
            raise UsageError(f"--output {args.output}: {e.strerror}") from None
    else:
        write_out(text)
    return EXIT_OK

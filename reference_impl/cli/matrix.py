"""``autocast-spec matrix [--devices ...] [--format markdown|html]``: the op-by-device policy grid."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..spectools.matrix import build_matrix, to_html, to_markdown
from .common import EXIT_OK, UsageError, add_spec_option, load_or_fail, write_out


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "matrix",
        help="print the op-by-device policy grid (Markdown, or one self-contained HTML page)",
        description="One grid, op by device, each cell the op's policy on that device. The HTML "
        "page is a single file, colour-coded by policy, with a filter box.",
    )
    p.add_argument(
        "--devices",
        nargs="+",
        metavar="DEVICE",
        help="devices to show, in this order (default: every device in the spec); commas also separate names",
    )
    p.add_argument("--format", choices=["markdown", "html"], default="markdown")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of stdout")
    add_spec_option(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    spec = load_or_fail(args.spec, args.torch_version)
    devices = [d for item in (args.devices or []) for d in item.split(",") if d]
    unknown = [d for d in devices if d not in spec.devices]
    if unknown:
        raise UsageError(
            f"--devices: no device {', '.join(unknown)} in the spec; choose from: "
            + ", ".join(sorted(spec.devices))
        )
    m = build_matrix(spec, devices or None)
    text = to_html(m) if args.format == "html" else to_markdown(m)
    if args.output:
        try:
            args.output.write_text(text, encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--output {args.output}: {e.strerror}") from None
    else:
        write_out(text)
    return EXIT_OK

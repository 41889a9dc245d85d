"""Entry point of ``autocast-spec``: the subcommands of ``reference_impl.cli``, verify-bundle and
merge-bundles.

It lives in the top layer because verify-bundle and merge-bundles belong to certification
(``conformance.certify.verify``, ``conformance.certify.merge``); the spec tools below it know
nothing of the suite. Each subcommand is a module with ``add_parser(subparsers)``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from conformance.certify import merge, verify
from reference_impl.cli import diff, extract, list_cmd, matrix, probe, validate
from reference_impl.cli.common import EXIT_USAGE, UsageError

# Subcommand modules, in help order.
SUBCOMMANDS = [validate, list_cmd, probe, extract, diff, matrix, verify, merge]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="autocast-spec",
        description="The autocast spec: validate it, list it, probe a backend, diff and compare.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.run(args))
    except UsageError as e:
        for line in e.lines:
            sys.stderr.write(f"error: {line}\n" if not line.startswith("autocast-spec") else f"{line}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())

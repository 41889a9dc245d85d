"""Shared pieces of the subcommands: errors, spec loading, output."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from autocast_spec.imports import why_not_imported
from autocast_spec.model import Spec
from autocast_spec.problems import SpecError

from ..spectools.installed_spec import load_installed_spec

EXIT_OK = 0
EXIT_DIFF = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """A user error: printed as one line (per problem), exit code 2, never a traceback."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def add_spec_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--spec",
        type=Path,
        action="append",
        metavar="PATH",
        help="spec file or directory (repeatable); default: the bundled spec",
    )
    p.add_argument(
        "--torch-version",
        metavar="X.Y",
        help="describe this torch version instead of the installed one",
    )


def add_import_option(p: argparse.ArgumentParser, help: str) -> None:
    """``--import MODULE`` (repeatable): the package that registers an out-of-tree backend."""
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE", help=help)


def import_modules(modules: list[str]) -> None:
    """Import each ``--import`` module; one that does not import is a usage error."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as e:
            raise UsageError(
                f"--import {module}: it does not import: {why_not_imported(e, module)}"
            ) from None


def load_or_fail(paths: list[Path] | None, torch_version: str | None = None) -> Spec:
    try:
        return load_installed_spec(paths, torch_version=torch_version)
    except SpecError as e:
        raise UsageError(*(str(p) for p in e.problems)) from None


def device_or_fail(spec: Spec, device: str) -> None:
    if device not in spec.devices:
        raise UsageError(
            f"--device {device}: no such device in the spec; choose one of: "
            + ", ".join(sorted(spec.devices))
        )


def write_out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")

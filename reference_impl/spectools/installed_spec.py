"""The spec read for the installed torch: :func:`autocast_spec.loader.load_spec` given its facts.

``autocast_spec`` never imports torch; this is where the installed torch's release,
build features and operator registry (:func:`~reference_impl.engine.torch_registry.installed_torch`)
are handed to it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from autocast_spec.loader import load_spec
from autocast_spec.model import Spec

from ..engine.torch_registry import installed_torch


def load_installed_spec(
    paths: Sequence[Path] | None = None,
    torch_version: str | None = None,
    check_registry: bool = True,
    nearest: bool = False,
    categories: Collection[str] | None = None,
) -> Spec:
    """:func:`~autocast_spec.loader.load_spec` for the installed torch (its arguments, the same)."""
    return load_spec(
        paths,
        installed=installed_torch(),
        torch_version=torch_version,
        check_registry=check_registry,
        nearest=nearest,
        categories=categories,
    )

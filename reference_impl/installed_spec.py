"""Moved: :mod:`reference_impl.spectools.installed_spec` (kept here for one release).

``from reference_impl.installed_spec import load_installed_spec`` still works; import it
from ``reference_impl.spectools.installed_spec`` instead (docs/migration.md).
"""

from __future__ import annotations

from .spectools.installed_spec import load_installed_spec

__all__ = ["load_installed_spec"]

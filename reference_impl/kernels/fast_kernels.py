"""The reference autocast's C++ kernels: built once per torch and Python version, loaded on first use.

The kernels at the borrowed Autocast key (:mod:`reference_impl.kernels.reference_dispatch`) come
in two forms that do the same thing: Python trampolines, and a C++ kernel per op
(``csrc/fast_kernels.cpp``) that applies a memoized plan of positional casts without
entering Python, and calls the Python handler (the policy engine) for everything else.
The C++ form is built with ``torch.utils.cpp_extension`` the first time a reference
region of a switched device opens (about 30 s, once per torch and Python version; the build is kept
under ``TORCH_EXTENSIONS_DIR`` or torch's default extension root). Where it cannot be
built (no compiler), or with ``REFERENCE_AUTOCAST_CPP=0``, the Python form is used.

This module only builds, loads and reports: :func:`extension` is the loaded module or
None. The weight-cast cache of the C++ form is the one both forms use once it is loaded
(:mod:`reference_impl.kernels.weight_cache`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import torch

ENV = "REFERENCE_AUTOCAST_CPP"
SOURCE = Path(__file__).parent / "csrc" / "fast_kernels.cpp"

_LOCK = threading.Lock()
_state: dict[str, ModuleType | None] = {}


def _name() -> str:
    """The extension's name: one build per torch version and Python version."""
    py = f"py{sys.version_info.major}{sys.version_info.minor}"
    return f"reference_autocast_kernels_{py}_" + re.sub(r"\W", "_", torch.__version__)


def _load() -> ModuleType | None:
    setting = os.environ.get(ENV, "1")
    if setting == "0":
        return None
    if setting != "1":
        warnings.warn(f"{ENV}={setting!r} is neither 0 nor 1: building the C++ kernels", stacklevel=4)
    # Imported here: it pulls in setuptools (0.1 s), which only a build or a first load needs.
    from torch.utils import cpp_extension

    name = _name()
    try:
        root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
        where = Path(root) / "autocast_conformance" / name
        where.mkdir(parents=True, exist_ok=True)
        built = where / f"{name}.so"
        if not built.exists() or built.stat().st_mtime < SOURCE.stat().st_mtime:
            print(
                f"reference_impl: building the reference autocast's C++ kernels into {where} "
                f"(about 30 s, once per torch and Python version and source; {ENV}=0 skips it)",
                file=sys.stderr,
            )
        with _ninja_on_path():
            return cpp_extension.load(
                name, [str(SOURCE)], extra_cflags=["-O2"], build_directory=str(where), verbose=False
            )
    except Exception as e:  # no compiler, no headers: the Python kernels do the same work
        warnings.warn(
            f"reference_impl: the C++ kernels could not be built ({type(e).__name__}: "
            f"{str(e).strip().splitlines()[-1] if str(e).strip() else ''}); the reference autocast "
            f"uses its Python kernels (slower; {ENV}=0 silences this)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


@contextlib.contextmanager
def _ninja_on_path() -> Iterator[None]:
    """``cpp_extension`` runs ``ninja`` from PATH. The ``ninja`` this package depends on sits
    beside the interpreter, on PATH only in an activated environment: while loading, add it."""
    here = Path(sys.executable).parent
    if shutil.which("ninja") is not None or not (here / "ninja").exists():
        yield
        return
    before = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{here}{os.pathsep}{before}"
    try:
        yield
    finally:
        os.environ["PATH"] = before


def extension() -> ModuleType | None:
    """The C++ kernels' module, built or loaded on the first call; None where the Python
    kernels are used."""
    if "ext" not in _state:
        with _LOCK:
            if "ext" not in _state:
                _state["ext"] = _load()
    return _state["ext"]


def loaded() -> ModuleType | None:
    """The module if :func:`extension` has loaded it (never builds)."""
    return _state.get("ext")

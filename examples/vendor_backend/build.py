"""Compile acme's two C++ libraries with ``torch.utils.cpp_extension``, once.

``acme_device``   csrc/acme_runtime.cpp + csrc/acme_kernels.cpp: allocator, device
                  guard, hooks, kernels, CPU fallback (about 40 s to compile)
``acme_autocast`` csrc/acme_autocast.cpp: the AutocastPrivateUse1 registrations
                  (about 30 s); one library per planted deviation (``ACME_DEVIATION``)

Each library is built into its own directory under the cache (``$ACME_BUILD_DIR``, else
``$XDG_CACHE_HOME/autocast-conformance/acme``, else ``~/.cache/...``), named by a hash of
its sources, compiler flags and the torch version: a second build of the same sources is a
lookup. An exclusive lock per library lets concurrent processes (pytest-xdist workers,
certification workers) wait for one build instead of racing.

``python -m examples.vendor_backend.build [DEVIATION]`` builds and prints the paths; it
loads nothing into the calling process, which is why the project's tests build this way.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.utils import cpp_extension

CSRC = Path(__file__).resolve().parent / "csrc"
DEVICE_SOURCES = ("acme_runtime.cpp", "acme_kernels.cpp")
AUTOCAST_SOURCE = "acme_autocast.cpp"
# ACME_DEVIATION values -> the C++ switch in acme_autocast.cpp
DEVIATIONS = {
    "moved": "ACME_MOVED",
    "missing": "ACME_MISSING",
    "extra": "ACME_EXTRA",
    "abort": "ACME_ABORT",
    "hang": "ACME_HANG",
}
BUILT = "built"  # written last: a directory without it holds an unfinished build


class BuildError(Exception):
    """A one-line reason the libraries cannot be built here."""


def cache_root() -> Path:
    if os.environ.get("ACME_BUILD_DIR"):
        return Path(os.environ["ACME_BUILD_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "autocast-conformance" / "acme"


def missing_toolchain() -> str | None:
    """Why nothing can be compiled on this machine, or None."""
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None and shutil.which("g++") is None:
        return f"no C++ compiler ({cxx} or g++ on PATH) to build the acme extension"
    if not cpp_extension.is_ninja_available():
        return "ninja is not installed (pip install ninja): torch.utils.cpp_extension needs it"
    return None


def deviation_flags(deviation: str | None) -> list[str]:
    if not deviation:
        return []
    if deviation not in DEVIATIONS:
        choices = ", ".join(DEVIATIONS)
        raise BuildError(f"ACME_DEVIATION={deviation}: use one of {choices} (or leave it unset)")
    return [f"-DACME_DEVIATION={DEVIATIONS[deviation]}"]


def _key(sources: list[Path], cflags: list[str]) -> str:
    h = hashlib.sha256()
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    h.update("\0".join([torch.__version__, *cflags]).encode())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock that the kernel releases if its holder dies (flock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _library(name: str, sources: list[Path], cflags: list[str]) -> Path:
    where = cache_root() / f"{name}-{_key(sources, cflags)}"
    so = where / f"{name}.so"
    if (where / BUILT).exists():
        return so
    reason = missing_toolchain()
    if reason:
        raise BuildError(reason)
    with _locked(where.with_suffix(".lock")):
        if (where / BUILT).exists():  # another process built it while we waited
            return so
        where.mkdir(parents=True, exist_ok=True)
        # cpp_extension's own lock file, left behind by a build that was killed
        (where / "lock").unlink(missing_ok=True)
        cpp_extension.load(
            name=name,
            sources=[str(s) for s in sources],
            extra_cflags=cflags,
            build_directory=str(where),
            is_python_module=False,
            verbose=False,
        )
        (where / BUILT).write_text(f"torch {torch.__version__}\n")
    return so


def build(deviation: str | None = None) -> tuple[Path, Path]:
    """The paths of acme's device library and of its autocast library (with ``deviation``)."""
    flags = deviation_flags(deviation)
    device = _library("acme_device", [CSRC / s for s in DEVICE_SOURCES], [])
    autocast = _library(f"acme_autocast_{deviation or 'shipped'}", [CSRC / AUTOCAST_SOURCE], flags)
    return device, autocast


def main(argv: list[str]) -> int:
    try:
        for path in build(argv[0] if argv else None):
            print(path)
    except BuildError as e:
        print(f"acme build: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Why a backend's package (or torch itself) does not import: one message naming the cause.

A vendor's package often installs from the registry but needs its vendor's runtime (a driver and
toolkit such as Ascend's CANN, or Rebellions' rebel-compiler), which pip does not install. The
failure then shows as an ``ImportError`` for a shared library or a module deep inside the
package, or, for a package that loads itself on ``import torch`` (an entry point of the group
``torch.backends``), as torch's ``Failed to load the backend extension``. :func:`why_not_imported`
reads the exception chain and says which library or module is missing, whether the pip package
holds it, which release is installed against the one a spec file names, and what to do.

This module never imports torch: :func:`autoload_failure` reads the error of an ``import torch``
that its caller tried.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator

from .model import VendorRelease
from .versions import specifier_contains

AUTOLOAD_GROUP = "torch.backends"  # torch's entry-point group for backends loaded on `import torch`
AUTOLOAD_OFF = "TORCH_DEVICE_BACKEND_AUTOLOAD=0"
_AUTOLOAD_FAILED = re.compile(r"Failed to load the backend extension: (\S+?)\.?(\s|$)")
_MISSING_LIBRARY = re.compile(r"([\w.+-]+\.so[\w.]*): cannot open shared object file")


def _chain(e: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _first_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"


def installed_version(package: str) -> str | None:
    try:
        return md.version(package)
    except md.PackageNotFoundError:
        return None


def _distribution(module: str) -> str:
    """The installed distribution that provides ``module`` (its own name where none is known)."""
    names = md.packages_distributions().get(module.split(".", 1)[0]) or [module]
    return names[0]


def _package_holds(package: str, filename: str) -> bool:
    try:
        files = md.files(package) or []
    except md.PackageNotFoundError:
        return False
    stem = filename.split(".so", 1)[0]
    return any(f.name.split(".so", 1)[0] == stem for f in files)


def autoloaded(module: str) -> str | None:
    """The entry point (``name = value``) by which ``module`` loads itself on ``import torch``."""
    for ep in md.entry_points(group=AUTOLOAD_GROUP):
        if ep.value.split(":", 1)[0].split(".", 1)[0] == module.split(".", 1)[0]:
            return f"{ep.name} = {ep.value}"
    return None


def _runtime(vendor: VendorRelease | None) -> str:
    return f" ({vendor.runtime})" if vendor is not None and vendor.runtime else ""


def _cause(e: BaseException, module: str, vendor: VendorRelease | None) -> str:
    """The cause, in words, from the deepest informative exception of the chain."""
    package = vendor.package if vendor else _distribution(module)
    installed = installed_version(package)
    release = f"{package} {installed}" if installed else package
    for err in _chain(e):
        m = _MISSING_LIBRARY.search(str(err))
        if m:
            lib = m.group(1)
            if _package_holds(package, lib):
                return (
                    f"{lib}, a file of {release}, cannot be loaded ({_first_line(err)}): reinstall {package}"
                )
            return (
                f"the shared library {lib} is missing: it is not a file of the pip package {release}, but "
                f"of the vendor's runtime{_runtime(vendor)}, which pip does not install: install it "
                "and set up its environment (its libraries on the loader path) before running"
            )
    for err in _chain(e):
        if isinstance(err, ModuleNotFoundError) and err.name:
            root = err.name.split(".", 1)[0]
            if root == module.split(".", 1)[0]:
                return f"{module} is not installed: pip install {_pin(vendor, package)}"
            return (
                f"it needs the module {err.name!r}, which no installed package provides: part of the "
                f"vendor's runtime{_runtime(vendor)}, not of the pip package {release}; install that runtime"
            )
    deepest = list(_chain(e))[-1]
    return _first_line(deepest)


def _pin(vendor: VendorRelease | None, package: str) -> str:
    return f"{vendor.package}=={vendor.version}" if vendor else package


def why_not_imported(e: BaseException, module: str, vendor: VendorRelease | None = None) -> str:
    """One message for ``module`` failing to import with ``e`` (``vendor``: the release a spec
    file names for it). It names the missing library or module and who provides it, the
    release installed where it is not the spec's, and ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` where
    the package loads itself on ``import torch``."""
    parts = [_cause(e, module, vendor)]
    if vendor is not None:
        installed = installed_version(vendor.package)
        if installed is not None and installed.split("+", 1)[0] != vendor.version:
            parts.append(
                f"the spec file describes {vendor.described}, and {vendor.package} {installed} is installed"
            )
    native = "ends the process" in parts[0]  # an abort while it loads: not a missing piece
    if vendor is not None and vendor.runtime and not native and not any(vendor.runtime in p for p in parts):
        parts.append(f"what pip does not install, as the file says: {vendor.runtime}")
    ep = autoloaded(module)
    if ep is not None and os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") != "0":
        parts.append(
            f"{module} loads itself on `import torch` (entry point {AUTOLOAD_GROUP}: {ep}): start Python "
            f"with {AUTOLOAD_OFF} to keep torch from loading it; the suite and autocast-spec import it "
            "themselves"
        )
    return "; ".join(parts)


def autoload_failure(e: BaseException) -> str:
    """One message for ``import torch`` failing with ``e``: a backend that loads itself on
    ``import torch`` and fails (torch's ``Failed to load the backend extension``) is named, with
    its cause and ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``."""
    m = _AUTOLOAD_FAILED.search(str(e))
    if m is None:
        return f"import torch fails: {_first_line(e)}"
    name = m.group(1)
    module = next(
        (
            ep.value.split(":", 1)[0].split(".", 1)[0]
            for ep in md.entry_points(group=AUTOLOAD_GROUP)
            if ep.name == name
        ),
        name,
    )
    return (
        f"import torch fails: the backend {name!r} loads itself on `import torch` (entry point "
        f"{AUTOLOAD_GROUP}) and does not load: {_cause(e, module, None)}; start Python with "
        f"{AUTOLOAD_OFF} to keep torch from loading it (the suite then imports it as its spec says)"
    )


# Variables that change how a process finds and loads code (the dynamic loader's, Python's, the
# shell's search path, glibc's module paths, and torch's own choice of backends to load): a spec
# file's vendor.environment may not set them, since every process the suite starts inherits them.
LOADER_VARIABLES = re.compile(
    r"^(LD_\w*|DYLD_\w*|PYTHON\w*|PATH|LIBPATH|SHLIB_PATH|GCONV_PATH|TORCH_DEVICE_BACKEND_AUTOLOAD)$"
)


def loader_variable_problem(name: str) -> str | None:
    """Why ``vendor.environment`` may not set ``name``, or None where it may."""
    if not LOADER_VARIABLES.match(name):
        return None
    return (
        f"vendor.environment may not set {name}: it changes how processes find and load code, and a "
        "spec file is data (every process the suite starts would inherit it); set it yourself in the "
        "shell that runs the suite, if your backend needs it"
    )


def pairing_note(
    vendor: VendorRelease, file: str, device: str, torch_range: str, installed_torch: str
) -> str:
    """One line where the installed release of the vendor's package, or of torch, is not the one
    the file ``file`` pairs with: both releases, and the command that makes a spec for what is
    installed (empty where they match)."""
    installed = installed_version(vendor.package)
    vendor_differs = installed is not None and installed.split("+", 1)[0] != vendor.version
    torch_differs = not specifier_contains(torch_range, installed_torch)
    if not (vendor_differs or torch_differs):
        return ""
    have = f"{vendor.package} {installed or '(not installed)'} with torch {installed_torch}"
    autoload = f"{AUTOLOAD_OFF} " if autoloaded(vendor.module) else ""
    out = f"{device}-{installed or 'installed'}.yaml"
    return (
        f"{file} describes {vendor.described} with torch {torch_range}, and {have} is installed: the "
        f"results speak for the file's release only; to make a spec for the installed one: {autoload}"
        f"autocast-spec probe --device {device} --import {vendor.module} --spec {file} -o {out} "
        f"(then review it and run with --spec {out})"
    )


def native_message(text: str, lines: int = 4) -> str:
    """What native code printed before the process ended (``terminate called after throwing an
    instance of 'c10::Error'`` and its ``what():`` line), on one line: the lines up to a C++
    backtrace (``Exception raised from``, ``frame #``), at most ``lines`` of them."""
    kept: list[str] = []
    for line in text.strip().splitlines():
        if line.startswith(("Exception raised from", "frame #")) or len(kept) == lines:
            break
        if line.strip() and not line.startswith("[W"):
            kept.append(line.strip())
    return " ".join(kept)


def import_ends_process(module: str | None = None, timeout: float = 600) -> str | None:
    """Try ``import torch`` (and ``module``) in a child process first: where that ends the
    process in native code (an abort while a library loads, which no ``except`` can catch), the
    reason, with the native message; else None (an ordinary exception is for the caller's own
    import to report)."""
    code = "import torch" + (f"; import {module}" if module else "")
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"`{code}` did not finish in {timeout:g} s (tried in a child process)"
    if p.returncode >= 0 and "terminate called" not in p.stderr:
        return None
    how = f"signal {signal.Signals(-p.returncode).name}" if p.returncode < 0 else f"exit {p.returncode}"
    said = native_message(
        p.stderr[p.stderr.find("terminate called") :] if "terminate called" in p.stderr else p.stderr
    )
    return f"`{code}` ends the process ({how}): {said or 'no message'}"


def autoloading() -> list[str]:
    """The entry points (``name = value``) that ``import torch`` loads here (none where
    ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``)."""
    if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD", "1") == "0":
        return []
    return [f"{ep.name} = {ep.value}" for ep in md.entry_points(group=AUTOLOAD_GROUP)]

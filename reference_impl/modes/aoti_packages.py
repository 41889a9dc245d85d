"""AOTInductor packages kept in the run's compile cache and reused by a later run.

Inductor's FX graph cache leaves an AOTInductor build out, so a warm run (``--compile-cache``)
rebuilt every package: a C++ compile each. A package here is named by what it is built from:
torch (version and git revision), the compiler function, inductor's config (less
``aot_inductor.metadata``, which a build writes into it), the CPU capability the C++ code
targets and the C++ compiler (``CXX``); the exported program (the code of its graph and of every
submodule, an autocast region's included, its signature); the inputs' shapes, strides and
dtypes; the constants' values. The same name is the same build, so a package found under it is
loaded instead of built (a package that does not load is built again). Packages are written
under a temporary name and renamed, so the workers of a run that share the cache never read
half a package.

Every package is built with :func:`package_configs`: the C++ wrapper around the kernels (the
code that holds the buffers and calls the kernels, in order) compiled at ``-O0`` where torch
compiles it at ``-O1``. The wrapper computes no value of the program: autocast's casts are in the
exported graph and in the kernels, which keep inductor's flags. Its C++ build was most of a
package's cost (measured in docs/jit.md).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch


def _tensor_bytes(t: torch.Tensor) -> bytes:
    flat = t.detach().cpu().contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def package_configs() -> dict[str, Any]:
    """The inductor configs every package is built with (see the module docstring): empty on a
    torch whose AOTInductor has no ``compile_wrapper_opt_level``."""
    import torch._inductor as inductor  # here, not at import: it costs about 1.4 s

    if not hasattr(inductor.config.aot_inductor, "compile_wrapper_opt_level"):
        return {}
    return {"aot_inductor.compile_wrapper_opt_level": "O0"}


def package_key(ep: torch.export.ExportedProgram, tensors: Sequence[torch.Tensor]) -> str:
    """The name of the package ``ep`` builds into for ``tensors`` (see the module docstring)."""
    import torch._inductor as inductor  # here, not at import: it costs about 1.4 s

    compiler = inductor.aoti_compile_and_package
    # aot_inductor.metadata: what a build writes into the config (device, platform, ISA)
    config = {k: v for k, v in inductor.config.save_config_portable().items() if k != "aot_inductor.metadata"}
    h = hashlib.sha256()
    for part in (
        torch.__version__,
        str(torch.version.git_version),
        f"{compiler.__module__}.{compiler.__qualname__}",
        repr(sorted(config.items(), key=lambda kv: kv[0])),
        repr(sorted(package_configs().items())),
        torch.backends.cpu.get_cpu_capability(),
        os.environ.get("CXX", ""),
        str(ep.graph_signature),
        *(f"{name}\n{getattr(m, 'code', '')}" for name, m in ep.graph_module.named_modules()),
        *(f"{tuple(t.shape)} {t.stride()} {t.dtype} {t.device}" for t in tensors),
    ):
        h.update(part.encode() + b"\0")
    for name, value in sorted({**ep.state_dict, **ep.constants}.items()):
        h.update(name.encode() + b"\0")
        if isinstance(value, torch.Tensor):
            h.update(f"{tuple(value.shape)} {value.dtype}".encode() + _tensor_bytes(value))
        else:
            h.update(repr(value).encode())
    return h.hexdigest()[:40]


def built_or_reused(
    ep: torch.export.ExportedProgram, tensors: Sequence[torch.Tensor], root: Path
) -> Callable[..., Any]:
    """The loaded package of ``ep`` for ``tensors``: from ``root/aoti_packages`` where an earlier
    build left it, else built there."""
    import torch._inductor as inductor

    packages = root / "aoti_packages"
    packages.mkdir(parents=True, exist_ok=True)
    path = packages / f"{package_key(ep, tensors)}.pt2"
    if path.is_file():
        try:
            return inductor.aoti_load_package(str(path))  # type: ignore[no-any-return,unused-ignore]
        except Exception:  # a package that does not load (cut short, another build): built again
            path.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=packages, prefix=".building-", suffix=".pt2")
    os.close(fd)
    try:
        inductor.aoti_compile_and_package(ep, package_path=tmp, inductor_configs=package_configs())
        os.chmod(tmp, 0o644)  # mkstemp's 0600: a cache that CI restores may be read by another user
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return inductor.aoti_load_package(str(path))  # type: ignore[no-any-return,unused-ignore]

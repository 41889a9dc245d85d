"""AOTInductor: a batch of op calls exported inside an autocast region and compiled ahead of
time (``torch._inductor.aoti_compile_and_package``), the package loaded back
(``aoti_load_package``) and run.

One package per batch (a C++ build per op would take hours); a batch that fails is split in
halves down to one package per op (:func:`~.batch.run_batch`), so the op that fails alone
carries the error. The packages live in the run's inductor cache directory, next to the
compiled code a warm run reuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .run import aoti_compiled

BACKEND = "inductor"  # the compiler behind the packages (a value divergence's backend)


def unavailable() -> str | None:
    """Why AOTInductor cannot run here (no API in this torch, no C++ compiler), else None."""
    import torch._inductor as inductor  # here, not at import: it costs about 1.4 s
    from torch._inductor import cpp_builder

    for name in ("aoti_compile_and_package", "aoti_load_package"):
        if not hasattr(inductor, name):
            return f"this torch ({torch.__version__}) has no torch._inductor.{name} (AOTInductor)"
    try:
        cpp_builder.get_cpp_compiler()
    except Exception as exc:  # InvalidCxxCompiler, or what a broken toolchain raises
        return f"AOTInductor needs a C++ compiler (set CXX): {type(exc).__name__}: {exc}".strip()
    return None


def aoti_runner(fn: Callable[..., Any], tensors: list[torch.Tensor]) -> Sequence[Any]:
    """A batch's function exported, compiled into one package, loaded and run: one result per op."""
    return tuple(aoti_compiled(fn, tensors)(*tensors))

"""How each pass turns a program into what is called, copied into a script as source.

Each function takes the program (a function or a module) and the example inputs of its first
call and returns the callable the script calls; a script carries the one its pass needs
(:mod:`.passes` says which, with which arguments). Like :mod:`.script_code`, real code that
imports torch and the standard library only.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import torch


def eager(model: Any, example: Sequence[torch.Tensor]) -> Any:
    """No pass: the program itself."""
    return model


def compiled(
    model: Any,
    example: Sequence[torch.Tensor],
    backend: str,
    config: dict[str, Any],
    mark_dynamic: bool,
) -> Callable[..., Any]:
    """``torch.compile(model, backend=backend)``, each call (where graphs compile) under the
    inductor ``config``; with ``mark_dynamic``, the examples' first dimensions marked dynamic."""
    if mark_dynamic:
        for t in example:
            if t.dim():
                torch._dynamo.mark_dynamic(t, 0)
    fn = torch.compile(model, backend=backend)
    if not config:
        return fn
    import torch._inductor.config as inductor_config

    def run(*args: Any) -> Any:
        with inductor_config.patch(config):
            return fn(*args)

    return run


class AsModule(torch.nn.Module):
    """A function as a module (what torch.export takes)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def export_program(model: Any, example: Sequence[torch.Tensor], strict: bool, dynamic: bool) -> Any:
    """``torch.export.export`` of the program (a function wrapped as a module); ``dynamic``: every
    dimension of every input ``Dim.AUTO`` (a second call with other shapes; a program without
    inputs has none)."""
    module = model if isinstance(model, torch.nn.Module) else AsModule(model)
    shapes: Any = None
    if dynamic and example:
        shapes = tuple({i: torch.export.Dim.AUTO for i in range(t.dim())} or None for t in example)
        if isinstance(module, AsModule):
            shapes = (shapes,)  # AsModule.forward(*args): one argument, the tuple
    return torch.export.export(module, tuple(example), strict=strict, dynamic_shapes=shapes)


def exported(
    model: Any, example: Sequence[torch.Tensor], strict: bool, decomposed: bool, dynamic: bool
) -> Callable[..., Any]:
    """The exported program's ``module()``, after ``run_decompositions()`` when ``decomposed``."""
    ep = export_program(model, example, strict, dynamic)
    if decomposed:
        ep = ep.run_decompositions()
    return ep.module()  # type: ignore[no-any-return,unused-ignore]


def aoti(
    model: Any, example: Sequence[torch.Tensor], dynamic: bool, configs: dict[str, Any]
) -> Callable[..., Any]:
    """The program exported (non-strict), compiled by AOTInductor with ``configs`` into a package
    (under the inductor cache directory, ``TORCHINDUCTOR_CACHE_DIR``, where set) and loaded back."""
    import torch._inductor as inductor

    ep = export_program(model, example, False, dynamic)
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or tempfile.gettempdir()
    os.makedirs(os.path.join(root, "aoti_packages"), exist_ok=True)
    path = tempfile.mktemp(suffix=".pt2", dir=os.path.join(root, "aoti_packages"))
    inductor.aoti_compile_and_package(ep, package_path=path, inductor_configs=configs)
    return inductor.aoti_load_package(path)  # type: ignore[no-any-return,unused-ignore]

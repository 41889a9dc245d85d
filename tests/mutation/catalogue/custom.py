"""Custom function and custom op mutants: ``torch.amp.custom_fwd`` / ``custom_bwd`` and
``torch.library``'s ``register_autocast`` monkeypatched."""

from __future__ import annotations

import functools
from typing import Any

import torch

from .mutant import CUDA_FAKE, context_mutant


def _custom_bwd_without_state() -> None:
    def custom_bwd(bwd: Any = None, *, device_type: str) -> Any:
        if bwd is None:
            return functools.partial(custom_bwd, device_type=device_type)
        return bwd

    torch.amp.custom_bwd = custom_bwd


def _custom_fwd_ignores_cast_inputs() -> None:
    orig = torch.amp.custom_fwd

    def custom_fwd(fwd: Any = None, *, device_type: str, cast_inputs: Any = None) -> Any:
        return orig(fwd, device_type=device_type) if fwd is not None else orig(device_type=device_type)

    torch.amp.custom_fwd = custom_fwd


def _cast_also_float64(orig: Any) -> Any:
    def _cast(value: Any, device_type: str, dtype: Any) -> Any:
        if (
            isinstance(value, torch.Tensor)
            and value.dtype == torch.float64
            and value.device.type == device_type
        ):
            return value.to(dtype)
        return orig(value, device_type, dtype)

    return _cast


def _custom_casts_float64() -> None:
    """custom_fwd(cast_inputs=...) and register_autocast also cast float64 tensors."""
    import torch._library.custom_ops as custom_ops
    import torch.amp.autocast_mode as autocast_mode

    autocast_mode._cast = _cast_also_float64(autocast_mode._cast)
    custom_ops._cast = _cast_also_float64(custom_ops._cast)  # type: ignore[attr-defined]


def _custom_fwd_leaves_kwargs() -> None:
    orig = torch.amp.custom_fwd

    def custom_fwd(fwd: Any = None, *, device_type: str, cast_inputs: Any = None) -> Any:
        if fwd is None:
            return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

        def decorate(*args: Any, **kwargs: Any) -> Any:
            bound = functools.partial(fwd, **kwargs)  # the keyword inputs skip cast_inputs
            return orig(bound, device_type=device_type, cast_inputs=cast_inputs)(*args)

        return decorate

    torch.amp.custom_fwd = custom_fwd


def _register_autocast_ignored() -> None:
    import torch._library.custom_ops as custom_ops

    custom_ops.CustomOpDef.register_autocast = lambda self, device_type, cast_inputs: None  # type: ignore[method-assign]


CUSTOM_MUTANTS = [
    context_mutant(
        "custom-bwd-loses-state",
        "custom_function",
        "custom_bwd runs backward with the current autocast state, not the forward's",
        ("test_custom_function.py",),
        _custom_bwd_without_state,
    ),
    context_mutant(
        "custom-fwd-ignores-cast-inputs",
        "custom_function",
        "custom_fwd(cast_inputs=float32) neither casts the inputs nor disables autocast",
        ("test_custom_function.py",),
        _custom_fwd_ignores_cast_inputs,
    ),
    context_mutant(
        "custom-casts-float64",
        "custom_function",
        "custom_fwd(cast_inputs=...) and register_autocast cast float64 inputs too",
        ("test_custom_function.py", "test_custom_op.py"),
        _custom_casts_float64,
    ),
    context_mutant(
        "custom-fwd-leaves-kwargs",
        "custom_function",
        "custom_fwd(cast_inputs=...) casts positional inputs only, not keyword ones",
        ("test_custom_function.py",),
        _custom_fwd_leaves_kwargs,
    ),
    context_mutant(
        "custom-op-autocast-ignored",
        "custom_op",
        "torch.library.register_autocast registers nothing: custom ops run uncast (cuda, FakeTensors)",
        ("test_custom_op.py",),
        _register_autocast_ignored,
        options=CUDA_FAKE,
    ),
]

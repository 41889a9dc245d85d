"""Bugs of the autograd surface around autocast: custom_fwd / custom_bwd and checkpoint recompute."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from .registry import cpu_autocast, name, observe, replay, witness

# --- replays ------------------------------------------------------------


def _cast_everything(value: Any, device: str, dtype: torch.dtype) -> Any:
    """The old custom_fwd cast: every floating tensor of the device, float64 included."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() and value.device.type == device else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_everything(v, device, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_everything(v, device, dtype) for k, v in value.items()}
    return value


@replay
def custom_fwd_casts_unconditionally() -> None:
    """custom_fwd(cast_inputs=...) cast inputs outside autocast regions too, float64 included."""
    orig = torch.amp.custom_fwd

    def custom_fwd(fwd: Any = None, *, device_type: str, cast_inputs: Any = None) -> Any:
        if fwd is None:
            return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
        if cast_inputs is None:
            return orig(fwd, device_type=device_type)

        @functools.wraps(fwd)
        def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
            args[0]._dtype = torch.get_autocast_dtype(device_type)
            args[0]._fwd_used_autocast = False
            with torch.autocast(device_type=device_type, enabled=False):
                return fwd(
                    *_cast_everything(args, device_type, cast_inputs),
                    **_cast_everything(kwargs, device_type, cast_inputs),
                )

        return decorate_fwd

    torch.amp.custom_fwd = custom_fwd


@replay
def custom_bwd_default_dtype() -> None:
    """custom_bwd re-entered autocast without the forward's dtype: backward ran in the default."""

    def custom_bwd(bwd: Any = None, *, device_type: str) -> Any:
        if bwd is None:
            return functools.partial(custom_bwd, device_type=device_type)

        @functools.wraps(bwd)
        def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
            with torch.autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast):
                return bwd(*args, **kwargs)

        return decorate_bwd

    torch.amp.custom_bwd = custom_bwd


def _patch_checkpoint_kwargs(change: Callable[[dict[str, Any]], None]) -> None:
    import torch.utils.checkpoint as ckpt

    get = ckpt._get_autocast_kwargs

    def patched(device_type: str = "cuda") -> Any:
        device_kwargs, cpu_kwargs = get(device_type)
        for kw in (device_kwargs, cpu_kwargs):
            if kw is not None:
                change(kw)
        return device_kwargs, cpu_kwargs

    ckpt._get_autocast_kwargs = patched


@replay
def checkpoint_recompute_default_dtype() -> None:
    """checkpoint's forward-in-backward re-entered autocast with the default dtype, not the forward's."""
    _patch_checkpoint_kwargs(lambda kw: kw.pop("dtype"))


@replay
def checkpoint_recompute_without_autocast() -> None:
    """checkpoint's recompute did not re-enter the device's autocast (XLA): it ran in float32."""
    _patch_checkpoint_kwargs(lambda kw: kw.update(enabled=False))


@replay
def checkpoint_queries_missing_module() -> None:
    """checkpoint asked the device module for is_autocast_enabled, which it lacks (MPS)."""
    import torch.utils.checkpoint as ckpt

    def broken(device_type: str = "cuda") -> Any:
        raise AttributeError(f"module 'torch.{device_type}' has no attribute 'is_autocast_enabled'")

    ckpt._get_autocast_kwargs = broken


# --- witnesses ----------------------------------------------------------


def _scale(log: dict[str, Any], cast_inputs: torch.dtype | None) -> Any:
    class Scale(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=cast_inputs)
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            log.setdefault("fwd", []).append(name(x.dtype))
            return x * 2

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            log["bwd"] = name(torch.get_autocast_dtype("cpu"))
            return g * 2

    return Scale


@witness
def custom_fwd_input_dtypes() -> Any:
    log: dict[str, Any] = {}
    fn = _scale(log, torch.float32)
    fn.apply(torch.ones(2, dtype=torch.float16))  # outside any region
    with cpu_autocast():
        fn.apply(torch.ones(2, dtype=torch.float64))
    return log["fwd"]


@witness
def custom_bwd_dtype() -> Any:
    log: dict[str, Any] = {}
    x = torch.ones(4, requires_grad=True)
    with cpu_autocast(torch.float16):
        y = _scale(log, None).apply(x)
    y.sum().backward()
    return log["bwd"]


def _checkpointed_state() -> Any:
    from torch.utils.checkpoint import checkpoint

    seen: list[Any] = []

    def body(x: torch.Tensor) -> torch.Tensor:
        seen.append([torch.is_autocast_enabled("cpu"), name(torch.get_autocast_dtype("cpu"))])
        return torch.mm(x, x)

    x = torch.randn(4, 4, requires_grad=True)

    def run() -> Any:
        with cpu_autocast(torch.float16):
            y = checkpoint(body, x, use_reentrant=False)
        y.float().sum().backward()
        return seen  # [forward state, recompute state]

    return observe(run)


@witness
def checkpoint_recompute_state() -> Any:
    return _checkpointed_state()

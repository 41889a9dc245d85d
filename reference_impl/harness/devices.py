"""Tensors on a device: real where the device is present, FakeTensors elsewhere."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch._subclasses.fake_tensor import FakeTensorMode


def device_is_real(device: str) -> bool:
    if device == "cpu":
        return True
    mod = getattr(torch, device, None)
    is_available = getattr(mod, "is_available", None)
    try:
        return bool(is_available()) if callable(is_available) else False
    except Exception:
        return False


@contextlib.contextmanager
def tensor_context(device: str, fake: bool) -> Iterator[None]:
    if not fake:
        yield
        return
    with FakeTensorMode(allow_non_fake_inputs=True):
        yield


def fake_device_supported(device: str) -> str | None:
    """None when FakeTensors of ``device`` carry its Autocast key, else the reason."""
    try:
        with tensor_context(device, fake=True):
            t = torch.empty(2, device=device)
            keys = str(torch._C._dispatch_keys(t))
    except Exception as e:  # pragma: no cover - depends on the torch build
        return f"cannot create FakeTensors on {device!r}: {e}"
    if "Autocast" not in keys:
        return (
            f"FakeTensors on {device!r} carry no Autocast dispatch key in this torch build "
            f"({keys}); the policy cannot be observed without the device"
        )
    return None

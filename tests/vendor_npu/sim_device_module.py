"""A stand-in device module for a built-in device type with no runtime here (hpu, xla).

Loaded as a pytest plugin (``-p sim_device_module``, this directory on PYTHONPATH) with
``SIM_DEVICE_MODULE=hpu``: registers ``torch.hpu`` (reporting no device), which is all
FakeTensors of that device need to be created (they carry the device's Autocast key), and
the fallthrough fallback on that Autocast key the vendor's extension registers in C++
(``TORCH_LIBRARY_IMPL(_, AutocastHPU, m)``; PyTorch registers none for hpu or xla). Then
``--policy-only --implementation reference`` runs the suite against a vendor's spec
(spec/vendors/habana.yaml, torch_xla.yaml) without the vendor's runtime.
"""

from __future__ import annotations

import os
import types

import torch

_LIBS: list[torch.library.Library] = []


def stand_in_module(name: str) -> types.ModuleType:
    """A device module reporting no device: what FakeTensors (and torch.compile) look up."""
    mod = types.ModuleType(name)
    mod.is_available = lambda: False  # type: ignore[attr-defined]
    mod.is_initialized = lambda: True  # type: ignore[attr-defined]
    mod.device_count = lambda: 1  # type: ignore[attr-defined]
    mod.current_device = lambda: 0  # type: ignore[attr-defined]
    mod._is_in_bad_fork = lambda: False  # type: ignore[attr-defined]
    mod.manual_seed_all = lambda seed: None  # type: ignore[attr-defined]
    mod.Stream = type("Stream", (), {})  # type: ignore[attr-defined]
    mod.Event = type("Event", (), {})  # type: ignore[attr-defined]
    return mod


def register(device: str) -> None:
    key = getattr(torch._C.DispatchKey, "Autocast" + device.upper(), None)  # AutocastXLA has no enum name
    if key is None or not torch._C._dispatch_has_backend_fallback(key):
        lib = torch.library.Library("_", "IMPL")
        lib.fallback(torch.library.fallthrough_kernel, "Autocast" + device.upper())
        _LIBS.append(lib)
    if getattr(torch, device, None) is None:
        torch._register_device_module(device, stand_in_module(f"{device}_sim"))


for _name in filter(None, os.environ.get("SIM_DEVICE_MODULE", "").split(",")):
    register(_name.strip())

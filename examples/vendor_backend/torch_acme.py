"""acme's Python package: ``import torch_acme`` makes the ``acme`` device usable.

What a vendor's ``import torch_npu`` does, in the order torch needs it:

1. load the C++ libraries (built once by :mod:`build`): the device library registers
   the allocator, device guard, hooks and kernels for PrivateUse1; the autocast
   library registers the AutocastPrivateUse1 kernels;
2. name PrivateUse1 ``acme`` and generate ``Tensor.acme()``, ``Tensor.is_acme``, ...;
3. register this module as ``torch.acme``: ``torch.autocast("acme")``, checkpointing,
   the autograd engine and the conformance suite ask it whether the device is
   available and which autocast dtypes it supports.

``ACME_DEVIATION`` (moved, missing, extra, abort, hang) loads an autocast library with
a planted deviation instead (csrc/acme_autocast.cpp says what each plants).
"""

from __future__ import annotations

import os
import sys

import torch

from .build import build

NAME = "acme"
AMP_DTYPES = (torch.float16, torch.bfloat16)


# --- torch.acme: the device module -------------------------------------------------


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return True


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device: int | str | torch.device) -> None:
    index = device if isinstance(device, int) else torch.device(device).index
    if index not in (None, 0):
        raise ValueError(f"acme has one device (acme:0), not {device}")


def synchronize(device: object = None) -> None:
    """acme kernels are synchronous."""


def get_device_name(device: object = None) -> str:
    return "acme (host memory, CPU kernels)"


def get_amp_supported_dtype() -> list[torch.dtype]:
    return list(AMP_DTYPES)


# Random numbers come from the CPU kernels the fallback runs: acme's RNG is the CPU's.
def manual_seed(seed: int) -> None:
    torch.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Called by torch.manual_seed; the CPU generator is seeded there already."""


def get_rng_state(device: object = None) -> torch.Tensor:
    return torch.get_rng_state()


def set_rng_state(state: torch.Tensor, device: object = None) -> None:
    torch.set_rng_state(state)


# --- installation ------------------------------------------------------------------------


def install() -> None:
    if torch._C._get_privateuse1_backend_name() == NAME:
        return
    for library in build(os.environ.get("ACME_DEVIATION") or None):
        torch.ops.load_library(str(library))
    torch.utils.rename_privateuse1_backend(NAME)
    torch.utils.generate_methods_for_privateuse1_backend()
    torch._register_device_module(NAME, sys.modules[__name__])


install()

"""Tensors on a device: real where the device is present, FakeTensors elsewhere."""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from autocast_spec.imports import import_ends_process, why_not_imported
from autocast_spec.model import VendorRelease

from ..engine.torch_registry import all_op_names, op_overload


@functools.cache
def device_is_real(device: str) -> bool:
    """Does ``device`` hold real tensors in this process? Asked of the backend itself: a tensor
    made there is of that device type and carries an Autocast dispatch key. A device module
    that says it is unavailable is believed without trying (creating a tensor there may abort);
    a backend that registers no ``torch.<device>`` module (torch_xla) is tried."""
    if device == "cpu":
        return True
    mod = getattr(torch, device, None)
    is_available = getattr(mod, "is_available", None)
    try:
        if callable(is_available) and not is_available():
            return False
        t = torch.empty(1, device=device)
        return t.device.type == device and "Autocast" in str(torch._C._dispatch_keys(t))
    except Exception:
        return False


@dataclass(frozen=True)
class VendorImport:
    """What importing a vendor's module did to the environment its spec names."""

    module: str
    set_here: tuple[str, ...]  # variables of ``vendor.environment`` that were unset: set before the import
    kept: tuple[str, ...]  # variables already set (left as they were, even to another value)
    preloaded: bool  # the module had loaded before (an entry point on ``import torch``)

    def note(self) -> str:
        """One phrase for a header; empty where the spec names no environment."""
        parts = [f"{k}={os.environ[k]}" for k in (*self.set_here, *self.kept)]
        if not parts:
            return ""
        said = f"environment for {self.module}: {', '.join(parts)}"
        if not self.set_here:
            return f"{said} (as set)"
        if self.preloaded:
            return (
                f"{said} (set by the suite, but {self.module} had already loaded with import torch: "
                "set it in the environment that starts Python)"
            )
        return f"{said} (set by the suite before importing it)"


class VendorImportError(Exception):
    """The module a vendor device file names did not import: ``why`` names the cause, in one
    message (:func:`autocast_spec.imports.why_not_imported`)."""

    def __init__(self, e: BaseException, vendor: VendorRelease) -> None:
        self.why = why_not_imported(e, vendor.module, vendor)
        super().__init__(self.why)


def import_vendor(vendor: VendorRelease) -> VendorImport:
    """Import the module a vendor device file names, first setting each variable of its
    ``environment`` that is unset (what the backend needs to load offline). Raises
    :class:`VendorImportError` where it does not import (ImportError, or the package failing
    as it loads)."""
    preloaded = vendor.module in sys.modules
    set_here = tuple(k for k in vendor.environment if k not in os.environ)
    for k in set_here:
        os.environ[k] = vendor.environment[k]
    # tried in a child process first, once per run (an xdist worker's controller has tried it)
    tried = preloaded or bool(os.environ.get("PYTEST_XDIST_WORKER"))
    ended = None if tried else import_ends_process(vendor.module)
    if ended is not None:  # a native abort while it loads: it would end this process too
        raise VendorImportError(RuntimeError(ended), vendor)
    try:
        importlib.import_module(vendor.module)
    except Exception as e:
        raise VendorImportError(e, vendor) from e
    all_op_names.cache_clear()  # the package registers operators of its own (torch_ipex::)
    kept = tuple(k for k in vendor.environment if k not in set_here)
    return VendorImport(vendor.module, set_here, kept, preloaded)


def adopt_privateuse1(device: str) -> bool:
    """Name the PrivateUse1 backend ``device`` when a loaded backend left it unnamed and torch
    knows no autocast device of that name (Google's torch-tpu names it only where a TPU is
    found); True when it did. The name is the process's for good, as torch allows one rename."""
    if torch._C._get_privateuse1_backend_name() != "privateuseone":
        return False
    try:
        if torch.amp.is_autocast_available(device):
            return False
    except RuntimeError:  # not a device type torch knows
        pass
    torch.utils.rename_privateuse1_backend(device)
    return True


@functools.cache
def vendor_autograd_neutralized(device: str) -> tuple[str, ...]:
    """Replace, for this process, the kernels an out-of-tree package registered at the Autograd key
    of ``device`` (the renamed PrivateUse1 backend's) with what torch's own would do; the aten
    operators replaced (none for another device).

    FakeTensorMode acts at the Python key, below the Autograd keys: a vendor's own kernels there
    (torch_npu 2.14.0 registers 131, ``_thnn_fused_gru_cell``, ``matmul``, ``lstm_cell`` among
    them) would run on FakeTensors and reach its runtime (torch_npu's end the process where no NPU
    is found). torch registers none of its own at that key directly (its Autograd kernels are the
    alias's), so each one listed is the vendor's. In its place: a CompositeImplicitAutograd op
    decomposes there, as torch's would (its inner ops meet autocast again); another runs below
    autograd (a policy-only run observes dtypes, not gradients). Called by a policy-only run only:
    the device is absent, so the vendor's autograd kernels could not have run for real either."""
    if device != torch._C._get_privateuse1_backend_name():
        return ()
    key = "AutogradPrivateUse1"
    ops = sorted(
        o for o in torch._C._dispatch_get_registrations_for_dispatch_key(key) if o.startswith("aten::")
    )
    lib = torch.library.Library("aten", "IMPL")
    replaced = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
        for op in ops:
            try:
                kernel = _as_torch_would(op)
            except Exception:  # a name the registry lists but Python cannot resolve (torch-tpu's ctc_loss)
                continue
            lib.impl(op.split("::", 1)[1], kernel, key)
            replaced.append(op)
    _KEPT.append(lib)  # registered for the process's life
    return tuple(replaced)


_KEPT: list[torch.library.Library] = []


def _as_torch_would(op: str) -> Callable[..., Any]:
    overload = op_overload(op)
    composite = torch._C._dispatch_has_kernel_for_dispatch_key(overload.name(), "CompositeImplicitAutograd")

    def kernel(*args: Any, **kwargs: Any) -> Any:
        if composite:
            return overload.decompose(*args, **kwargs)
        with torch._C._AutoDispatchBelowAutograd():
            return overload(*args, **kwargs)

    return kernel


@contextlib.contextmanager
def tensor_context(device: str, fake: bool) -> Iterator[None]:
    if not fake:
        yield
        return
    # no fallback kernels: an op without a fake implementation raises instead of running the
    # real kernel on zeros of the device; no vendor autograd kernels: a policy-only run never
    # hands an op to a vendor's kernel other than its Autocast ones
    vendor_autograd_neutralized(device)
    with FakeTensorMode(allow_non_fake_inputs=True, allow_fallback_kernels=False):
        yield


def fake_device_supported(device: str, where: str | None = None) -> str | None:
    """None when FakeTensors of ``device`` (made on ``where``, default ``device``) carry its
    Autocast key, else the reason."""
    try:
        with tensor_context(device, fake=True):
            t = torch.empty(2, device=where or device)
            keys = str(torch._C._dispatch_keys(t))
    except Exception as e:  # pragma: no cover - depends on the torch build
        return f"cannot create FakeTensors on {where or device!r}: {(str(e).strip().splitlines() or [''])[0]}"
    if "Autocast" not in keys:
        return (
            f"FakeTensors on {device!r} carry no Autocast dispatch key in this torch build "
            f"({keys}); the policy cannot be observed without the device"
        )
    return None

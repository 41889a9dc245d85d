"""Checks that the op catalog's samples and entry points really work.

Shared by ``tests/test_op_catalog.py`` and ``autocast-spec validate --run-samples``.
"""

from __future__ import annotations

import contextlib

import torch

from autocast_spec.catalog import EntryPoint, OpInfo, Sample
from autocast_spec.model import Spec

from ..engine.dtypes import dtype_of
from ..engine.torch_registry import op_exists
from ..harness.calls import Intercepted, autograd_key_for, intercept
from ..harness.devices import device_is_real, tensor_context
from ..harness.samples import call, entry_point_sample, materialize
from ..harness.state import quiet, raw_autocast


def devices_of(spec: Spec, op: str) -> list[str]:
    """The built-in devices whose spec lists ``op``, cpu first."""
    devs = [d for d, ds in spec.devices.items() if ds.builtin and op in ds.ops]
    return sorted(devs, key=lambda d: (d != "cpu", d != "cuda", d))


def run_device_for(spec: Spec, op: str) -> str:
    """Where a sample of ``op`` can run here: cpu if cpu lists it or it has a CPU kernel."""
    devs = devices_of(spec, op)
    if "cpu" in devs:
        return "cpu"
    for d in devs:
        if device_is_real(d):
            return d
    return devs[0] if devs else "cpu"


def sample_skip_reason(spec: Spec, op: str, device: str) -> str | None:
    """Why a sample of ``op`` cannot run on ``device`` here, from the spec's data."""
    if not op_exists(op):  # a vendor's own operator (torch_ipex::) where its package is not loaded
        return f"{op} is not an operator of this process (its package is not imported)"
    info = spec.op_info(op)
    if info is not None and not info.fake_kernel and not device_is_real(device):
        return f"{op} has no FakeTensor kernel (fake_kernel: false at {info.loc}) and {device} is absent"
    if info is not None and info.intercept_only:
        return f"{op}: {info.intercept_only} (intercept_only at {info.loc})"
    return None


def run_sample(
    op: str, sample: Sample, device: str, dtype: torch.dtype, autocast_dtype: torch.dtype | None = None
) -> None:
    """Call the op with the sample (floating inputs in ``dtype``), as the suite does:
    under autocast to ``autocast_dtype`` when given, so the kernel sees the dtypes
    the op's policy produces. FakeTensors where the device is absent."""
    fake = not device_is_real(device)
    with quiet(), tensor_context(device, fake):
        m = materialize(sample, dtype, device)
        if autocast_dtype is None:
            call(op, m)
        else:
            with raw_autocast(device, autocast_dtype):
                call(op, m)


def entry_point_reaches_op(spec: Spec, info: OpInfo, ep: EntryPoint, device: str, dispatch_key: str) -> bool:
    """Calling ``ep`` reaches ``info.op`` right below Autocast (with autocast on to the
    device's default dtype)."""
    fake = not device_is_real(device)
    sample = entry_point_sample(ep, info.samples)
    with quiet(), tensor_context(device, fake):
        m = materialize(sample, torch.float32, device)
        with (
            raw_autocast(device, dtype_of(spec.device(device).default_dtype)),
            intercept(info.op, autograd_key_for(dispatch_key)) as calls,
            contextlib.suppress(Intercepted),
        ):
            call(ep.name, m)
    return any(c.op == info.op for c in calls)

"""The bundled spec is right for the installed torch: proven against the dispatcher.

For every built-in device: the spec lists exactly the ops that carry a kernel on
the device's Autocast key, and each op's policy is the one the kernel applies,
as observed by reference_impl.probe.observe (real CPU tensors; FakeTensors for
the other devices). An op the catalog marks ``needs_device`` (its Autocast kernel
calls the device runtime) is checked for registration only, where the device is absent.
"""

from __future__ import annotations

import pytest
import torch

from autocast_spec.model import Policy, Spec
from reference_impl.engine.dtypes import dtype_of
from reference_impl.engine.torch_registry import autocast_registrations
from reference_impl.harness.devices import device_is_real
from reference_impl.probe.observe import DeviceObservation, observe_device

# Devices whose policies cannot be observed here, with the reason. The
# registration-set check still runs for them.
UNOBSERVABLE_DEVICES = {
    "maia": "FakeTensors on 'maia' carry no Autocast dispatch key in the stock build, so the "
    "AutocastMAIA kernels cannot be reached without MAIA hardware",
}


def builtin_devices(spec: Spec) -> list[str]:
    return [d for d, ds in spec.devices.items() if ds.builtin]


def _observations(spec: Spec, device: str) -> DeviceObservation:
    ds = spec.devices[device]
    return observe_device(device, ds.dispatch_key, dtype_of(ds.default_dtype))


def test_every_builtin_device_is_checked(spec: Spec) -> None:
    # the parametrization below uses this list; an empty list would pass vacuously
    assert {"cpu", "cuda", "xpu", "mps", "mtia"} <= set(builtin_devices(spec))


@pytest.mark.parametrize("device", ["cpu", "cuda", "xpu", "mps", "mtia", "maia"])
def test_spec_lists_exactly_the_registered_ops(spec: Spec, device: str) -> None:
    ds = spec.devices[device]
    registered = autocast_registrations(ds.dispatch_key)
    listed = set(ds.ops)
    assert registered, f"torch registers no {ds.dispatch_key} kernels: wrong key?"
    assert not (listed - registered), (
        f"{device}: in spec, no {ds.dispatch_key} kernel: {sorted(listed - registered)}"
    )
    assert not (registered - listed), (
        f"{device}: {ds.dispatch_key} kernel, not in spec: {sorted(registered - listed)}"
    )


@pytest.mark.parametrize("device", ["cpu", "cuda", "xpu", "mps", "mtia", "maia"])
def test_spec_policy_is_observed_policy(spec: Spec, device: str) -> None:
    obs = _observations(spec, device)
    if device in UNOBSERVABLE_DEVICES:
        assert obs.unobservable_reason, f"{device} became observable: drop it from UNOBSERVABLE_DEVICES"
        pytest.skip(UNOBSERVABLE_DEVICES[device])
    assert obs.unobservable_reason is None, obs.unobservable_reason
    ds = spec.devices[device]
    wrong = []
    for op, entry in ds.ops.items():
        o = obs.observations[op]
        info = spec.op_info(op)
        if not o.observed and info is not None and info.needs_device and not device_is_real(device):
            continue  # its Autocast kernel calls the device runtime: listed, not observable here
        if not o.observed:
            wrong.append(f"{op}: could not be observed ({o.error})")
        elif o.policy is not entry.policy:
            wrong.append(f"{op}: spec says {entry.policy}, kernel does {o.policy} ({o.detail}) [{entry.loc}]")
        elif entry.message is not None and o.message != entry.message:
            wrong.append(f"{op}: banned message differs: spec {entry.message!r}, kernel {o.message!r}")
    assert not wrong, f"{device}: {len(wrong)} policy mismatches:\n" + "\n".join(wrong)


def test_append_dtype_targets_match_kernels(spec: Spec) -> None:
    """fp32_append_dtype ops redispatch to the overload the catalog names."""
    checked = 0
    for device in ("cuda", "xpu", "mtia"):
        ds = spec.devices[device]
        obs = observe_device(device, ds.dispatch_key, torch.float16)
        for op in ds.ops_with(Policy.FP32_APPEND_DTYPE):
            info = spec.op_info(op)
            if info is None:
                continue  # the catalog test reports missing samples
            assert obs.observations[op].append_target == info.append_dtype_target, op
            checked += 1
    if not checked:
        pytest.skip("no fp32_append_dtype op has a catalog entry yet")

"""The op catalog (spec/ops/) covers every listed op, and its samples really run."""

from __future__ import annotations

import pytest

from reference_impl.catalog_checks import (
    entry_point_reaches_op,
    run_device_for,
    run_sample,
    sample_skip_reason,
)
from reference_impl.dtypes import dtype_of
from reference_impl.installed_spec import load_installed_spec

SPEC = load_installed_spec()
LISTED = sorted({op for d in SPEC.devices.values() if d.builtin for op in d.ops})
SAMPLES = [
    pytest.param(op, i, id=f"{op}-{i}") for op, info in SPEC.ops.items() for i in range(len(info.samples))
]
ENTRY_POINTS = [
    pytest.param(op, i, id=f"{op}-{ep.name}")
    for op, info in SPEC.ops.items()
    for i, ep in enumerate(info.entry_points)
]


def test_every_listed_op_has_samples() -> None:
    missing = [op for op in LISTED if op not in SPEC.ops]
    assert not missing, f"{len(missing)} ops listed by a device spec have no samples in spec/ops/: {missing}"


# (floating input dtype, autocast dtype): the feeds the suite uses.
FEEDS = [
    ("float32", "off"),
    ("float32", "bfloat16"),
    ("bfloat16", "bfloat16"),
    ("float32", "float16"),
    ("float16", "float16"),
]


@pytest.mark.parametrize("op,index", SAMPLES)
@pytest.mark.parametrize("dtype,autocast_dtype", FEEDS)
def test_sample_runs(op: str, index: int, dtype: str, autocast_dtype: str) -> None:
    """Each sample runs as the suite feeds it: float32 inputs without autocast, and
    float32 or autocast-dtype inputs under autocast (the policy decides what the
    kernel sees; a float32-policy op never gets a half-precision kernel input)."""
    device = run_device_for(SPEC, op)
    reason = sample_skip_reason(SPEC, op, device)
    gap = SPEC.ops[op].kernel_gap(device, autocast_dtype)
    if reason or gap:
        pytest.skip(reason or f"kernel gap: {gap.reason if gap else ''}")
    ac = None if autocast_dtype == "off" else dtype_of(autocast_dtype)
    run_sample(op, SPEC.ops[op].samples[index], device, dtype_of(dtype), ac)


@pytest.mark.parametrize("op,index", ENTRY_POINTS)
def test_entry_point_reaches_op(op: str, index: int) -> None:
    info = SPEC.ops[op]
    device = run_device_for(SPEC, op)
    key = SPEC.devices[device].dispatch_key
    ep = info.entry_points[index]
    assert entry_point_reaches_op(SPEC, info, ep, device, key), (
        f"{ep.name} with its sample does not reach {op} on {device}"
    )

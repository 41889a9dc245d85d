"""The op catalog (spec/ops/) covers every listed op, and its samples really run."""

from __future__ import annotations

import pytest
import torch

from reference_impl.catalog_checks import entry_point_reaches_op, run_device_for, run_sample
from reference_impl.spec.loader import load_spec

SPEC = load_spec()
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


@pytest.mark.parametrize("op,index", SAMPLES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_sample_runs(op: str, index: int, dtype: torch.dtype) -> None:
    device = run_device_for(SPEC, op)
    run_sample(op, SPEC.ops[op].samples[index], device, dtype)


@pytest.mark.parametrize("op,index", ENTRY_POINTS)
def test_entry_point_reaches_op(op: str, index: int) -> None:
    info = SPEC.ops[op]
    device = run_device_for(SPEC, op)
    key = SPEC.devices[device].dispatch_key
    ep = info.entry_points[index]
    assert entry_point_reaches_op(SPEC, info, ep, device, key), (
        f"{ep.name} with its sample does not reach {op} on {device}"
    )

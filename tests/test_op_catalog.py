"""The op catalog (spec/ops/) covers every listed op, and its samples really run."""

from __future__ import annotations

import pytest

from autocast_spec.builders import build_ops
from autocast_spec.versions import Applicability
from autocast_spec.yaml_source import YamlDocument
from reference_impl.engine.dtypes import dtype_of
from reference_impl.spectools.catalog_checks import (
    entry_point_reaches_op,
    run_device_for,
    run_sample,
    sample_skip_reason,
)
from reference_impl.spectools.installed_spec import load_installed_spec

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


def _gap_catalog() -> YamlDocument:
    """One op with a gap of every form: for all releases, and bounded by since/until; cited by a
    link, and by none with the release it was seen on."""
    sample = {"args": [{"t": [2, 2]}]}
    bounded = {"reason": "only 2.12", "since": "2.12", "until": "2.13", "source": "none", "seen_on": "2.12"}
    everywhere = {"reason": "every release", "source": "https://github.com/pytorch/pytorch/issues/1"}
    op = {
        "samples": [sample],
        "functorch_gaps": {"vmap": everywhere, "grad": bounded},
        "kernel_gaps": [
            {"device": "cpu", "dtype": "float16", **everywhere},
            {"device": "cpu", "dtype": "bfloat16", **bounded},
        ],
    }
    return YamlDocument("ops.yaml", {"ops": {"aten::mm": op}}, {})


@pytest.mark.parametrize("release,bounded_gap", [("2.11", False), ("2.12", True), ("2.13", False)])
def test_gaps_hold_for_their_releases(release: str, bounded_gap: bool) -> None:
    """A gap without since/until holds on every release; one with them only in its range. Its
    reason names its source."""
    info = build_ops(_gap_catalog(), Applicability(release, frozenset()))["aten::mm"]
    assert info.functorch_gap("vmap", "cpu") == "every release (https://github.com/pytorch/pytorch/issues/1)"
    assert (info.functorch_gap("grad", "cpu") is not None) is bounded_gap
    if bounded_gap:
        assert info.functorch_gap("grad", "cpu") == "only 2.12 (no public report; seen on torch 2.12)"
    assert info.kernel_gap("cpu", "float16") is not None
    assert (info.kernel_gap("cpu", "bfloat16") is not None) is bounded_gap


def test_bundled_gap_bounded_to_old_releases() -> None:
    """The bundled catalog's bounded gaps: present in the spec read for 2.11, gone from the one
    read for 2.12 (whichever torch is installed)."""
    old, new = (load_installed_spec(torch_version=v, check_registry=False) for v in ("2.11", "2.12"))
    gone = [
        (op, k)
        for op, i in old.ops.items()
        for k in {g.transform for g in i.functorch_gaps}
        if op in new.ops and k not in {g.transform for g in new.ops[op].functorch_gaps}
    ]
    assert gone, "no functorch gap of torch 2.11 is bounded by until"

"""`autocast-spec diff`: devices, files, versions; JSON shape; exit codes; bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from autocast_spec.common import frozen_map
from autocast_spec.files import bundled_spec_dir, device_torch_ranges
from autocast_spec.model import Spec
from autocast_spec.versions import nearest_covered_version
from conformance.cli import main
from reference_impl.cli import diff as diff_cmd
from reference_impl.probe import bundled, device_spec
from reference_impl.probe.observe import DeviceObservation
from reference_impl.spectools.installed_spec import load_installed_spec
from reference_impl.spectools.specdiff import Side, diff_sides


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["diff", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cuda_xpu_differ_by_exactly_the_cudnn_ops(capsys: pytest.CaptureFixture[str], spec: Spec) -> None:
    data = run_json(capsys, "cuda", "xpu")
    cuda, xpu = spec.devices["cuda"], spec.devices["xpu"]
    expected = [
        {"op": op, "policy": cuda.ops[op].policy.value} for op in sorted(set(cuda.ops) - set(xpu.ops))
    ]
    assert len(expected) == 2 and all("cudnn" in e["op"] for e in expected)
    assert data["ops"] == {"added": [], "removed": expected, "changed": [], "not_observed": []}


def test_cpu_cuda_lists_the_cross_device_differences(capsys: pytest.CaptureFixture[str], spec: Spec) -> None:
    data = run_json(capsys, "cpu", "cuda")
    cpu, cuda = spec.devices["cpu"], spec.devices["cuda"]
    moved = {m["op"]: (m["from"], m["to"]) for m in data["ops"]["changed"]}
    want_moved = {
        op: (cpu.ops[op].policy.value, cuda.ops[op].policy.value)
        for op in set(cpu.ops) & set(cuda.ops)
        if cpu.ops[op].policy is not cuda.ops[op].policy
    }
    assert want_moved and moved == want_moved
    assert {e["op"] for e in data["ops"]["added"]} == set(cuda.ops) - set(cpu.ops)
    assert {e["op"] for e in data["ops"]["removed"]} == set(cpu.ops) - set(cuda.ops)
    # representative: a cuda-only op carries cuda's policy, and the default dtypes differ
    some = sorted(set(cuda.ops) - set(cpu.ops))[0]
    assert {"op": some, "policy": cuda.ops[some].policy.value} in data["ops"]["added"]
    assert {"field": "default_dtype", "from": cpu.default_dtype, "to": cuda.default_dtype} in data["defaults"]


def test_identical_sides_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "cuda", "cuda", "--exit-code"]) == 0
    assert "No differences." in capsys.readouterr().out
    assert main(["diff", "cuda", "xpu", "--exit-code"]) == 1
    assert main(["diff", "cuda", "xpu"]) == 0  # without --exit-code, differences are not failure


def test_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    data = run_json(capsys, "cuda", "mps")
    assert set(data["ops"]) == {"added", "removed", "changed", "not_observed"}
    assert data["ops"]["not_observed"] == [] and data["not_observed_notes"] == []
    for e in data["ops"]["added"] + data["ops"]["removed"]:
        assert set(e) == {"op", "policy"}
    for e in data["ops"]["changed"]:
        assert set(e) == {"op", "from", "to"}
    assert {"defaults", "supported_dtypes", "rules", "tolerances", "jit_limitations"} <= set(data)


def test_device_file_and_directory_sides(capsys: pytest.CaptureFixture[str]) -> None:
    spec_dir = bundled_spec_dir()
    assert main(["diff", str(spec_dir / "xpu.yaml"), "xpu", "--exit-code"]) == 0
    assert main(["diff", str(spec_dir), str(spec_dir), "--exit-code"]) == 0
    capsys.readouterr()


def test_versions_in_one_tree(spec: Spec) -> None:
    """Older releases are read from the same files through since/until entries."""
    d = diff_cmd.compute(f"{bundled_spec_dir()}@2.12", f"{bundled_spec_dir()}@2.13")
    removed = {(e.device, e.op) for e in d.removed}
    # every op dropped between the releases is one the 2.13 spec no longer lists
    assert removed and all(op not in spec.devices[dev].ops for dev, op in removed)


def test_rules_and_tolerances_are_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = bundled_spec_dir()
    changed = tmp_path / "spec"
    changed.mkdir()
    for f in src.rglob("*"):
        if f.is_file():
            target = changed / f.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(f.read_bytes())
    rules = changed / "rules.yaml"
    text = rules.read_text()
    assert "leaf_only: true" in text and "float16: {atol: " in text
    rules.write_text(
        text.replace("leaf_only: true", "leaf_only: false").replace(
            "float16: {atol: ", "float16: {atol: 9", 1
        )
    )
    data = run_json(capsys, str(src), str(changed))
    assert {"field": "cache.leaf_only", "from": True, "to": False} in data["rules"]
    assert any(t["key"] == "default/float16" for t in data["tolerances"])


@pytest.mark.parametrize(
    "argv",
    [
        ["nosuchdevice", "cuda"],
        ["cuda", "missing/dir/spec.yaml"],
        ["cuda", "probe:"],
        ["probe:nosuchdevice", "cuda"],
        ["cuda", "cuda@1.0"],
    ],
)
def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert main(["diff", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err


def test_invalid_spec_on_either_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text('kind: device\ndevice: cuda\ntorch: ">=2.11"\nops:\n  fastest: [aten::mm]\n')
    for argv in (["cuda", str(bad)], [str(bad), "cuda"]):
        assert main(["diff", *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert "bad.yaml" in err and "\n" not in err, err


def test_unobserved_ops_are_not_reported_as_removed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], spec: Spec
) -> None:
    """A probe that cannot observe some ops' policies lists them as not observed, not as removed."""
    real = device_spec.observe_device
    hidden: list[str] = []

    def half_blind(device: str, *args: Any, **kwargs: Any) -> DeviceObservation:
        obs = real(device, *args, **kwargs)
        hidden[:] = sorted(obs.observations)[:3]
        for op in hidden:
            obs.observations[op] = replace(obs.observations[op], policy=None, error="simulated: unobservable")
        return obs

    monkeypatch.setattr(device_spec, "observe_device", half_blind)
    assert main(["diff", "cpu", "probe:cpu", "--format", "json", "--exit-code"]) == 0  # not drift
    data = json.loads(capsys.readouterr().out)
    assert len(hidden) == 3 and set(hidden) <= set(spec.devices["cpu"].ops)
    assert data["identical"] and data["ops"]["removed"] == [] and data["ops"]["added"] == []
    assert data["ops"]["not_observed"] == [
        {"op": op, "side": "b", "reason": "simulated: unobservable"} for op in hidden
    ]
    assert main(["diff", "probe:cpu", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "**Not observed**" in text and "| removed |" not in text and "| added |" not in text
    assert all(f"`{op}` | simulated: unobservable |" in text for op in hidden)


def test_probe_side_borrows_from_the_nearest_covered_spec(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A torch no bundled spec covers: the probe borrows from the nearest covered release, and says so."""
    monkeypatch.setattr(bundled, "installed_torch_version", lambda: "2.99.0")
    near = nearest_covered_version(device_torch_ranges(), "2.99.0")
    assert near is not None
    found = bundled.bundled_device("cuda")
    assert found is not None and found.torch_version == near
    assert found.spec == load_installed_spec(torch_version=near, check_registry=False).devices["cuda"]
    assert f"torch {near}" in found.source and "2.99.0" in found.source
    # CUDA's dtype rules cannot be observed without a GPU: they come from that release's spec
    assert main(["diff", f"cuda@{near}", "probe:cuda", "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["not_observed_notes"]
    assert any(n["side"] == "b" and f"torch {near}" in n["note"] for n in notes), notes
    assert main(["probe", "--device", "cuda", "--table"]) == 0
    assert f"bundled spec for torch {near}" in capsys.readouterr().err


def _cpu_vendor_file(tmp_path: Path, module: str, environment: str = "") -> Path:
    """A vendor device file for cpu (the installed torch's release) naming ``module``."""
    from reference_impl.engine.torch_registry import installed_torch_version

    major, minor = installed_torch_version().split(".")[:2]
    f = tmp_path / "acme.yaml"
    f.write_text(
        "kind: device\ndevice: cpu\ndispatch_key: AutocastCPU\nbuiltin: false\n"
        f'torch: ">={major}.{minor},<{major}.{int(minor) + 1}"\n'
        f"vendor: {{package: acme-torch, version: '1.2.3', module: {module}{environment}}}\n"
        "default_dtype: bfloat16\nsupported_dtypes: [bfloat16]\n"
        "ops:\n  lower_precision_fp: [aten::mm]\n",
        encoding="utf-8",
    )
    return f


@pytest.mark.parametrize("probe_first", [False, True])
def test_probe_of_a_vendor_device_needs_the_module_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], probe_first: bool
) -> None:
    """probe:D beside a vendor file for D imports the module it names, as the suite does; one
    that does not import is exit 2, naming it (not a diff of what torch alone registers)."""
    f = str(_cpu_vendor_file(tmp_path, "acme_torch_not_installed"))
    argv = ["probe:cpu", f] if probe_first else [f, "probe:cpu"]
    assert main(["diff", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'acme_torch_not_installed'" in err and "pip install acme-torch==1.2.3" in err


def test_probe_of_a_vendor_device_imports_its_module_with_its_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    (tmp_path / "acme_diff_probe_mod.py").write_text(
        "import os\nSEEN = os.environ.get('ACME_OFFLINE')\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ACME_OFFLINE", raising=False)
    f = _cpu_vendor_file(tmp_path, "acme_diff_probe_mod", ", environment: {ACME_OFFLINE: '1'}")
    assert diff_cmd.compute(str(f), "probe:cpu") is not None
    assert sys.modules["acme_diff_probe_mod"].SEEN == "1"  # set before the import


def test_diff_import_option_that_fails_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "cpu", "probe:cpu", "--import", "acme_torch_not_installed"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --import acme_torch_not_installed") and "\n" not in err


def test_a_registered_only_op_is_compared_for_its_registration_not_its_policy(spec: Spec) -> None:
    """A spec's ``registered_only`` op (registered, no policy stated) is not a difference from a
    side that states its policy, and is one from a side that does not register it."""
    cpu = spec.devices["cpu"]
    stated, unregistered = sorted(cpu.ops)[:2]
    vague = replace(
        cpu,
        ops=frozen_map({op: e for op, e in cpu.ops.items() if op not in (stated, unregistered)}),
        registered_only=frozen_map(
            {**cpu.registered_only, stated: "no policy observed", "acme::own": "own op"}
        ),
    )
    d = diff_sides(Side("spec", {"cpu": vague}, None, True), Side("probe", {"cpu": cpu}, None, True))
    assert [(u.op, u.side) for u in d.not_observed] == [(stated, "a")]
    assert "no policy observed" in d.not_observed[0].reason
    assert [e.op for e in d.added] == [unregistered] and [e.op for e in d.removed] == ["acme::own"]
    same = Side("x", {"cpu": vague}, None, True)
    assert not diff_sides(same, same).not_observed


def test_a_probe_does_not_compare_what_only_sources_say(spec: Spec) -> None:
    """cast_only_between is read from a kernel's sources: beside a file stating it, the probe
    side takes it from that file and says so, instead of reporting it removed."""
    cpu = spec.devices["cpu"]
    vendor = replace(cpu, cast_only_between=("float32", "lower"))
    probe = Side("probe:cpu", {"cpu": cpu}, None, True)
    assert diff_sides(Side("ipex", {"cpu": vendor}, None, True), probe).defaults  # compared: a change
    side = diff_cmd.with_unobservable_from(probe, "cpu", vendor, "ipex")
    assert not diff_sides(Side("ipex", {"cpu": vendor}, None, True), side).defaults
    note = "cast_only_between: read from the kernels' sources, not observed; taken from ipex"
    assert side.notes[-1] == note

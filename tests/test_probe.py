"""`autocast-spec probe`: the installed torch, probed live, equals the bundled spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autocast_spec.model import Spec
from conformance.cli import main
from reference_impl.cli import diff as diff_cmd
from reference_impl.probe.device_spec import probe_device, probed_yaml
from reference_impl.spectools.installed_spec import load_installed_spec
from reference_impl.spectools.specdiff_render import to_markdown

BUILTIN = ["cpu", "cuda", "xpu", "mps", "mtia", "maia"]


def test_builtin_list_matches_spec(spec: Spec) -> None:
    assert {d for d, ds in spec.devices.items() if ds.builtin} == set(BUILTIN)


@pytest.mark.parametrize("device", BUILTIN)
def test_probe_equals_bundled_spec(device: str) -> None:
    d = diff_cmd.compute(f"probe:{device}", device)
    assert d.identical, f"autocast-spec diff probe:{device} {device} differs:\n{to_markdown(d)}"


@pytest.mark.parametrize("device", ["cpu", "mtia"])
def test_probe_yaml_validates_and_round_trips(spec: Spec, device: str, tmp_path: Path) -> None:
    probed = probe_device(device, spec.devices[device])
    out = tmp_path / f"{device}.yaml"
    out.write_text(probed_yaml(probed), encoding="utf-8")
    loaded = load_installed_spec([out])  # a flat device file overlaid on the bundled spec
    assert loaded.devices[device].policy_table() == spec.devices[device].policy_table()
    assert main(["diff", str(out), device, "--exit-code"]) == 0


def test_maia_policies_are_marked_as_not_observed(spec: Spec) -> None:
    probed = probe_device("maia", spec.devices["maia"])
    assert probed.borrowed and "maia" in probed.borrowed[0]
    assert all(e.note and e.note.startswith("not observed") for e in probed.spec.ops.values())
    assert "NOT OBSERVED" in probed_yaml(probed)


def test_probe_cli_json_and_table(capsys: pytest.CaptureFixture[str], spec: Spec) -> None:
    assert main(["probe", "--device", "cpu", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == "cpu" and data["default_dtype"] == spec.devices["cpu"].default_dtype
    assert main(["probe", "--device", "cpu", "--table", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == spec.devices["cpu"].policy_table()


@pytest.mark.parametrize("device", ["nosuchdevice", "privateuse1"])
def test_probe_bad_device_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], device: str) -> None:
    assert main(["probe", "--device", device]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --device") and "\n" not in err, err


def test_probe_policy_only_names_its_new_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--device", "cpu", "--policy-only"]) == 2
    err = capsys.readouterr().err
    assert "--table" in err and "Traceback" not in err, err

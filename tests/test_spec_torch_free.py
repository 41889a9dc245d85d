"""The spec package runs without torch: it imports, loads and validates the bundled spec.

``tests/helpers/torch_free_load.py`` runs in a subprocess where importing torch raises
ImportError, and reports which top-level modules ``autocast_spec`` pulled in. Allowed:
the standard library, PyYAML, jsonschema, packaging, and what those three need (read
from their installed metadata). Torch's facts reach the loader as data
(:class:`~autocast_spec.versions.TorchFacts`); the op-registry check is tested here
with a registry given that way.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from autocast_spec.loader import load_spec
from autocast_spec.problems import SpecError
from autocast_spec.versions import TorchFacts
from reference_impl.engine.torch_registry import all_op_names

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "tests" / "helpers" / "torch_free_load.py"
SPEC_DEPENDENCIES = ("PyYAML", "jsonschema", "packaging")  # pyproject's, besides torch


# Made by any Cython-compiled extension module (PyYAML's _yaml), not imported by name.
CYTHON_RUNTIME = ("cython_runtime", "_cython_")


def _key(dist: str) -> str:
    return dist.lower().replace("_", "-")


@cache
def allowed_modules() -> frozenset[str]:
    """Top-level modules of the spec package's dependencies, of what they require, and of their
    own extras (jsonschema's format checkers import ``idna`` and others where installed)."""
    dists: set[str] = set()
    todo = [(name, True) for name in SPEC_DEPENDENCIES]
    while todo:
        name, with_extras = todo.pop()
        if _key(name) in dists:
            continue
        dists.add(_key(name))
        try:
            meta = importlib.metadata.metadata(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional requirement that is not installed: nothing can import it
        extras = ["", *(meta.get_all("Provides-Extra") or [])] if with_extras else [""]
        for text in meta.get_all("Requires-Dist") or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in extras):
                todo.append((req.name, False))
    return frozenset(
        module
        for module, owners in importlib.metadata.packages_distributions().items()
        if any(_key(d) in dists for d in owners)
    )


@dataclass(frozen=True)
class TorchFreeRun:
    root: Path  # holds autocast_spec/ and spec/
    report: dict[str, Any]

    def repro(self) -> str:
        return f"cd {self.root} && PYTHONPATH={self.root} {sys.executable} {PROBE}"


def run_torch_free(root: Path) -> TorchFreeRun:
    env = {**os.environ, "PYTHONPATH": str(root)}
    p = subprocess.run(
        [sys.executable, str(PROBE)], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, f"{PROBE.name} crashed (exit {p.returncode}):\n{p.stdout}{p.stderr}"
    return TorchFreeRun(root, json.loads(p.stdout.strip().splitlines()[-1]))


def violations(run: TorchFreeRun) -> list[str]:
    """What breaks the spec package's torch-free promise in ``run``, one line each."""
    rep = run.report
    bad = []
    if rep["error"]:
        bad.append(f"importing or loading failed without torch: {rep['error']}")
    if rep.get("file") and not Path(rep["file"]).is_relative_to(run.root):
        bad.append(f"autocast_spec came from {rep['file']}, not from {run.root}")
    for name in rep["imported"]:
        if name in sys.stdlib_module_names or name == "autocast_spec" or name.startswith(CYTHON_RUNTIME):
            continue
        if name not in allowed_modules():
            deps = ", ".join(SPEC_DEPENDENCIES)
            bad.append(f"the spec package imported {name!r} (allowed: stdlib, {deps}, what they require)")
    return bad


def assert_torch_free(run: TorchFreeRun) -> None:
    bad = violations(run)
    assert not bad, "\n".join(bad) + f"\nreproduce:\n  {run.repro()}\n" + run.report.get("traceback", "")


def test_spec_package_loads_and_validates_without_torch() -> None:
    run = run_torch_free(ROOT)
    assert_torch_free(run)
    spec = run.report["spec"]
    assert spec["torch_version"] == "2.13.0" and "cuda" in spec["devices"] and spec["ops"] > 100, (
        f"{spec}\nreproduce:\n  {run.repro()}"
    )
    # the schema check works torch-free, naming file and line
    assert any(
        p.startswith("npu.yaml:7: ops: unknown policy 'lower_precison_fp'") for p in run.report["planted"]
    ), f"{run.report['planted']}\nreproduce:\n  {run.repro()}"


@pytest.mark.parametrize(
    ("planted", "expected"),
    [
        ("import torch\n", "torch is not importable here"),
        ("from reference_impl.engine.torch_registry import all_op_names\n", "torch is not importable here"),
        ("import numpy\n", "imported 'numpy'"),
    ],
)
def test_the_check_catches_a_planted_import(tmp_path: Path, planted: str, expected: str) -> None:
    shutil.copytree(ROOT / "autocast_spec", tmp_path / "autocast_spec")
    shutil.copytree(ROOT / "spec", tmp_path / "spec")
    loader = tmp_path / "autocast_spec" / "loader.py"
    future = "from __future__ import annotations\n"
    loader.write_text(loader.read_text().replace(future, future + planted, 1))
    found = violations(run_torch_free(tmp_path))
    assert any(expected in line for line in found), found


def test_registry_check_takes_the_op_names_it_is_given() -> None:
    """Unknown op names come from ``TorchFacts.op_names``: each at its file and line, did-you-mean."""
    facts = TorchFacts("2.13.0", op_names=all_op_names() - {"aten::mm"})
    with pytest.raises(SpecError) as e:
        load_spec(installed=facts)
    found = [str(p) for p in e.value.problems]
    assert found and all("aten::mm is not an operator" in p and "did you mean" in p for p in found), found
    assert any("cpu.yaml:" in p for p in found), found
    # the release alone (no registry known): no check, the spec loads
    assert load_spec(installed=TorchFacts("2.13.0")).devices["cpu"].policy_of("aten::mm") is not None

"""The suite installs from its wheel and certifies from an empty directory.

Builds the wheel (``pip wheel . --no-deps``), checks that it holds every package
of the repository, the spec files and both JSON Schemas, installs it into a fresh
virtual environment (torch 2.13.0 first, from the local wheel cache), and from an
empty directory runs ``pytest --pyargs conformance --backend cpu --certify out/``
and ``autocast-spec verify-bundle out/``. Torch's own CPU autocast must certify
as conformant against the bundled spec.
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest
from helpers.certify_helpers import REPO, Run, run
from helpers.once import once_per_run

pytestmark = pytest.mark.slow

TORCH_PIN = "torch==2.13.0"


def repo_packages() -> set[str]:
    out = set()
    for top in ("autocast_spec", "reference_impl", "conformance"):
        for init in (REPO / top).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO)
            if "__pycache__" not in rel.parts and "data" not in rel.parts:
                out.add(rel.as_posix())
    return out


def build_wheel(dist: Path) -> dict[str, Run]:
    cmd = [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation"]
    return {"wheel": run([*cmd, "-w", str(dist)], REPO, timeout=600)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per test run, whichever xdist worker asks first (helpers/once.py)."""
    dist, runs = once_per_run(tmp_path_factory, "dist", build_wheel)
    assert runs["wheel"].rc == 0, runs["wheel"].repro()
    (whl,) = dist.glob("autocast_conformance-*.whl")
    return whl


def test_wheel_contents(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    missing_pkgs = sorted(p for p in repo_packages() if f"{p}/__init__.py" not in names)
    assert not missing_pkgs, (
        f"packages missing from the wheel (add them to pyproject packages): {missing_pkgs}"
    )
    spec_files = sorted(
        p.relative_to(REPO / "spec").as_posix()
        for p in (REPO / "spec").rglob("*")
        if p.suffix in (".yaml", ".json")
    )
    missing = [f for f in spec_files if f"autocast_spec/data/{f}" not in names]
    assert spec_files and not missing, f"spec files missing from the wheel: {missing}"
    sources = sorted(
        p.relative_to(REPO).as_posix() for p in (REPO / "reference_impl" / "kernels" / "csrc").glob("*.cpp")
    )
    assert sources and not set(sources) - names, f"C++ sources missing from the wheel: {sources}"
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "conformance.plugin" in text and "autocast-spec" in text, text


def test_installed_wheel_certifies_cpu(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    r = run([sys.executable, "-m", "venv", str(venv)], tmp_path, timeout=300)
    assert r.rc == 0, r.repro()
    # nothing of the checkout on the path: pip would take its metadata as the package installed
    env = {"PYTHONPATH": "", "PYTEST_ADDOPTS": ""}
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
    r = run([*pip, TORCH_PIN], tmp_path, env, timeout=1200)
    assert r.rc == 0, r.repro()
    r = run([*pip, str(wheel)], tmp_path, env, timeout=600)
    assert r.rc == 0, r.repro()

    empty = tmp_path / "empty"
    empty.mkdir()
    cert = run(
        [
            str(venv / "bin" / "pytest"),
            "-q",
            "--pyargs",
            "conformance",
            "--backend",
            "cpu",
            "--certify",
            "out/",
        ],
        empty,
        env,
    )
    assert (empty / "out" / "manifest.json").is_file(), cert.repro()
    meta = json.loads((empty / "out" / "certification.json").read_text())
    assert meta["suite_path"].startswith(str(venv)), f"the suite ran from {meta['suite_path']}, not the wheel"
    ver = run([str(venv / "bin" / "autocast-spec"), "verify-bundle", "out/"], empty, env)
    assert "test list regenerated from the spec" in ver.out, ver.repro()
    assert cert.rc == 0 and ver.rc == 0 and "verdict: conformant" in ver.out, (
        cert.repro() + "\n" + ver.repro()
    )

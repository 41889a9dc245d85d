"""A vendor's package that does not load here: one message per problem, naming the cause.

The packages below are fixtures of this file (a module and its ``*.dist-info`` written to a
temporary directory on ``sys.path``): they fail the ways torch-npu 2.14.0 and torch-rbln 0.12.0
fail without their vendors' runtimes (a shared library of the runtime, a module of the
runtime, a package that loads itself on ``import torch``). They prove the messages, not
anything about those packages.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autocast_spec.common import frozen_map
from autocast_spec.imports import autoload_failure, pairing_note, why_not_imported
from autocast_spec.model import VendorRelease
from autocast_spec.problems import SpecError
from conformance.cli import main
from reference_impl.spectools.installed_spec import load_installed_spec

ROOT = Path(__file__).resolve().parents[1]
LIBRARY_ERROR = (
    "raise ImportError('libacme_rt.so: cannot open shared object file: No such file or directory')\n"
)
RUNTIME = "Acme runtime toolkit (not on the package registry)"


def _package(
    where: Path, module: str, body: str, version: str = "1.2.3", entry_point: bool = False
) -> VendorRelease:
    """``module`` (raising as ``body`` says) and the dist-info of its package ``acme-torch``."""
    (where / f"{module}.py").write_text(body, encoding="utf-8")
    info = where / f"acme_torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: acme-torch\nVersion: {version}\n")
    (info / "RECORD").write_text(f"{module}.py,,\nacme_torch-{version}.dist-info/METADATA,,\n")
    if entry_point:
        (info / "entry_points.txt").write_text(f"[torch.backends]\nacme = {module}:_autoload\n")
    return VendorRelease("acme-torch", "1.2.3", module, frozen_map(), None, RUNTIME)


def _failure(module: str) -> BaseException:
    sys.modules.pop(module, None)
    try:
        __import__(module)
    except Exception as e:
        return e
    raise AssertionError(f"{module} imported")


def test_a_missing_library_names_the_runtime_not_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    vendor = _package(tmp_path, "acme_lib_mod", LIBRARY_ERROR)
    why = why_not_imported(_failure("acme_lib_mod"), "acme_lib_mod", vendor)
    assert "libacme_rt.so is missing" in why and "not a file of the pip package acme-torch 1.2.3" in why
    assert RUNTIME in why and "pip install" not in why, why


def test_a_missing_module_of_the_runtime_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    vendor = _package(tmp_path, "acme_mod_mod", "import acme_rebel_runtime_absent\n")
    why = why_not_imported(_failure("acme_mod_mod"), "acme_mod_mod", vendor)
    assert "'acme_rebel_runtime_absent'" in why and RUNTIME in why and "pip install" not in why, why


def test_another_release_installed_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    vendor = _package(tmp_path, "acme_rel_mod", LIBRARY_ERROR, version="2.0.0")
    why = why_not_imported(_failure("acme_rel_mod"), "acme_rel_mod", vendor)
    assert "describes acme-torch 1.2.3, and acme-torch 2.0.0 is installed" in why, why
    note = pairing_note(vendor, "acme.yaml", "acme", ">=2.13,<2.14", "2.14.0")
    assert "acme-torch 2.0.0 with torch 2.14.0 is installed" in note and "with torch >=2.13,<2.14" in note
    assert (
        "autocast-spec probe --device acme --import acme_rel_mod --spec acme.yaml -o acme-2.0.0.yaml" in note
    )
    assert pairing_note(vendor, "acme.yaml", "acme", ">=2.0", "2.14.0") != ""  # the vendor alone differs


def test_a_package_loaded_by_import_torch_names_the_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    vendor = _package(tmp_path, "acme_auto_mod", LIBRARY_ERROR, entry_point=True)
    why = why_not_imported(_failure("acme_auto_mod"), "acme_auto_mod", vendor)
    assert "loads itself on `import torch`" in why and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in why, why
    err = RuntimeError(
        "Failed to load the backend extension: acme. You can disable extension auto-loading ..."
    )
    err.__cause__ = _failure("acme_auto_mod")
    said = autoload_failure(err)
    assert (
        "'acme'" in said and "libacme_rt.so is missing" in said and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in said
    )


def test_import_torch_failing_is_exit_2_with_one_message(tmp_path: Path) -> None:
    """A package that loads itself on ``import torch`` and fails: pytest and autocast-spec stop
    with exit code 2 and the cause (not pytest's exit 3 or a traceback)."""
    _package(tmp_path, "acme_torch_entry", "def _autoload():\n    " + LIBRARY_ERROR, entry_point=True)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": str(Path(sys.executable).parent)}
    for argv in (
        ["-m", "pytest", "--pyargs", "conformance", "--co", "-q"],
        ["-m", "conformance.cli", "list"],
    ):
        p = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
        assert "Traceback" not in p.stderr and "libacme_rt.so is missing" in p.stderr, p.stderr[-2000:]
        assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in p.stderr, p.stderr[-2000:]


def test_an_import_option_error_is_not_cut(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "acme_long_mod.py").write_text(
        "raise RuntimeError('x' * 300 + ' remedy: install the toolkit')\n", encoding="utf-8"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        assert main(["probe", "--device", "cpu", "--import", "acme_long_mod"]) == 2
    finally:
        sys.path.remove(str(tmp_path))
    assert "remedy: install the toolkit" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "PYTHONPATH", "PATH"]
)
def test_environment_that_changes_how_code_loads_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    f = tmp_path / "acme.yaml"
    f.write_text(
        "kind: device\ndevice: cpu\ndispatch_key: AutocastCPU\nbuiltin: false\ntorch: '>=2.8,<2.16'\n"
        "default_dtype: bfloat16\nsupported_dtypes: [bfloat16]\n"
        "vendor:\n  package: acme-torch\n  version: '1.2.3'\n  module: json\n  environment:\n"
        f"    ACME_OFFLINE: '1'\n    {name}: /tmp/x.so\nops:\n  lower_precision_fp: [aten::mm]\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as e:
        load_installed_spec([f], check_registry=False)
    assert [p.line for p in e.value.problems] == [14], e.value.problems
    assert main(["validate", str(f)]) == 2
    assert f"{f}:14: vendor.environment may not set {name}" in capsys.readouterr().err


def test_the_suite_refuses_it_too(tmp_path: Path) -> None:
    f = tmp_path / "acme.yaml"
    f.write_text(
        "kind: device\ndevice: cpu\ndispatch_key: AutocastCPU\nbuiltin: false\ntorch: '>=2.8,<2.16'\n"
        "default_dtype: bfloat16\nsupported_dtypes: [bfloat16]\n"
        "vendor: {package: acme-torch, version: '1.2.3', module: json,\n"
        "         environment: {LD_PRELOAD: /tmp/x.so}}\n"
        "ops:\n  lower_precision_fp: [aten::mm]\n",
        encoding="utf-8",
    )
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "conformance",
        "--backend",
        "cpu",
        "--spec",
        str(f),
        "--co",
    ]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 2 and "acme.yaml:9: vendor.environment may not set LD_PRELOAD" in p.stderr, (
        p.stdout[-1500:] + p.stderr[-1500:]
    )


def _sim(**env: str) -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests' / 'vendor_npu'}", **env}


def test_probe_takes_the_dtypes_a_device_cannot_give_from_a_spec_file(tmp_path: Path) -> None:
    """torch.autocast('npu') disables itself for every dtype here (the simulated backend says no
    dtype is supported): probe exits 2 saying so and naming --spec; with --spec FILE it takes
    the file's dtype defaults and says so."""
    probe = [sys.executable, "-m", "conformance.cli", "probe", "--device", "npu", "--import", "npu_backend"]
    env = _sim(NPU_SIM_NO_AUTOCAST="1")
    p = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "pass --spec FILE" in p.stderr, p.stderr[-1500:]
    spec = ROOT / "tests" / "vendor_npu" / "npu.yaml"
    out = tmp_path / "npu-probed.yaml"
    p = subprocess.run([*probe, "--spec", str(spec), "-o", str(out)], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-1500:]
    text = out.read_text(encoding="utf-8")
    assert "supported_dtypes: [float16, bfloat16]" in text and str(spec) in text, text[:1500]


def test_extract_takes_a_vendor_files_dtypes_for_another_release_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--spec FILE --torch-version X`` outside the file's range is read as ``--device`` reads the
    bundled vendor file: the dtype defaults are taken, and a note names the file's range."""
    source = ROOT / "tests" / "fixtures" / "extract" / "privateuse1.cpp"
    npu = ROOT / "spec" / "vendors" / "torch_npu.yaml"
    assert main(["extract", str(source), "--spec", str(npu), "--torch-version", "2.15"]) == 0
    err = capsys.readouterr().err
    assert "describes torch >=2.13,<2.14, not torch 2.15" in err, err
    assert main(["extract", str(source), "--device", "npu", "--torch-version", "2.15"]) == 0
    assert "not torch 2.15: check them against that release" in capsys.readouterr().err


ABORTING = (
    "import os\n"
    "os.write(2, b\"terminate called after throwing an instance of 'c10::ValueError'\\n"
    "  what():  Duplicated key 'acme_key' found\\n\")\n"
    "os.abort()\n"
)


def test_a_package_that_aborts_as_it_loads_is_one_message(tmp_path: Path) -> None:
    """A native abort while the package loads (torch-npu 2.14.0 in the registry's torch 2.14.0:
    'Duplicated key') cannot be caught in-process: it is tried in a child process first, and the
    run stops with exit 2 and the native message, on import torch (an entry point) and on the
    suite's own import of the module its spec names."""
    _package(tmp_path, "acme_abort_mod", "def _autoload():\n    import acme_abort_body\n", entry_point=True)
    (tmp_path / "acme_abort_body.py").write_text(ABORTING, encoding="utf-8")
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": str(Path(sys.executable).parent)}
    argv = [sys.executable, "-m", "pytest", "--pyargs", "conformance", "--co", "-q"]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "SIGABRT" in p.stderr and "Duplicated key 'acme_key'" in p.stderr, p.stderr[
        -2000:
    ]
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in p.stderr, p.stderr[-2000:]
    spec = tmp_path / "acme.yaml"
    spec.write_text(
        "kind: device\ndevice: cpu\ndispatch_key: AutocastCPU\nbuiltin: false\ntorch: '>=2.8,<2.16'\n"
        "default_dtype: bfloat16\nsupported_dtypes: [bfloat16]\n"
        "vendor: {package: acme-torch, version: '1.2.3', module: acme_abort_body}\n"
        "ops:\n  lower_precision_fp: [aten::mm]\n",
        encoding="utf-8",
    )
    argv = [*argv[:-2], "--backend", "cpu", "--spec", str(spec), "--co", "-q", "-n", "0"]
    p = subprocess.run(
        argv, env={**env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, capture_output=True, text=True
    )
    assert p.returncode == 2 and "ends the process (signal SIGABRT)" in p.stderr, p.stderr[-2000:]
    assert "Duplicated key 'acme_key'" in p.stderr, p.stderr[-2000:]

"""Vendor device files tied to a vendor release: ``vendor:`` (package, version, module), the
torch range it pairs with, its own ``known_bugs`` and ``registered_only`` operators, and the
suite importing the module itself (no ``-p`` plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autocast_spec.problems import SpecError
from conformance.target import Options, TargetError, resolve_target
from reference_impl.spectools.installed_spec import load_installed_spec
from reference_impl.spectools.vendor_matrix import vendor_files

HEAD = (
    "kind: device\ndevice: {device}\ndispatch_key: AutocastCPU\nbuiltin: false\ntorch: '>=2.8,<2.16'\n"
    "default_dtype: bfloat16\nsupported_dtypes: [bfloat16]\n"
)


def _file(tmp_path: Path, body: str, device: str = "cpu") -> Path:
    f = tmp_path / "vendor.yaml"
    f.write_text(HEAD.format(device=device) + body, encoding="utf-8")
    return f


def test_probed_vendor_files_name_their_release() -> None:
    probed = 0
    for f in vendor_files():
        ds = next(d for d in load_installed_spec([f], check_registry=False).devices.values() if d.provenance)
        # every vendor file says which release it read and how, even where there is none to name
        assert ds.provenance.get("how") in ("probed", "extracted", "by_hand"), f
        assert ds.provenance.get("release"), f
        if ds.vendor is None:
            assert str(ds.provenance["release"]).startswith("none: "), f  # no release: says why
            continue
        probed += 1
        assert ds.provenance["release"] == ds.vendor.version, f
        assert ds.provenance["how"] in ("probed", "extracted", "by_hand"), f
    assert probed >= 3, "torch_xla, IPEX and Google's torch-tpu name their release"


def test_a_vendor_module_that_does_not_import_is_a_usage_error(tmp_path: Path) -> None:
    f = _file(
        tmp_path,
        "vendor: {package: acme-torch, version: '1.2.3', module: acme_torch_not_installed}\n"
        "ops:\n  lower_precision_fp: [aten::mm]\n",
    )
    with pytest.raises(TargetError) as e:
        resolve_target(Options("cpu", None, (str(f),), None, False))
    assert "pip install acme-torch==1.2.3" in str(e.value) and "acme_torch_not_installed" in str(e.value)


def test_a_vendor_module_is_imported_by_the_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "acme_vendor_probe_mod.py").write_text("IMPORTED = True\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    f = _file(
        tmp_path,
        "vendor: {package: acme-torch, version: '1.2.3', module: acme_vendor_probe_mod}\n"
        "ops:\n  lower_precision_fp: [aten::mm]\n",
    )
    t = resolve_target(Options("cpu", None, (str(f),), None, False))
    import sys

    assert "acme_vendor_probe_mod" in sys.modules and t.device_spec.vendor is not None


def test_vendor_known_bug_without_source_needs_seen_on(tmp_path: Path) -> None:
    bug = (
        "known_bugs:\n  - id: acme-bug\n    check: context.unsupported_dtype\n"
        "    observed: 'x'\n    reason: seen\n    source: none\n"
    )
    with pytest.raises(SpecError) as e:
        load_installed_spec([_file(tmp_path, bug)])
    assert "seen_on" in str(e.value)
    spec = load_installed_spec([_file(tmp_path, bug + "    seen_on: 'acme 1.2.3, torch 2.13.0'\n")])
    (b,) = spec.devices["cpu"].known_bugs
    assert b.explains("context.unsupported_dtype", "cpu", "x") and "acme 1.2.3" in b.cited
    assert not b.explains("context.unsupported_dtype", "cpu", "y")


def test_registered_only_operators_get_a_registration_case(tmp_path: Path) -> None:
    from autocast_spec.model import Policy
    from conformance.categories import registration
    from conformance.kit.case import Listing

    f = _file(
        tmp_path,
        "registered_only:\n  - {op: aten::mm, reason: a vendor operator stand-in}\n"
        "ops:\n  fp32: [aten::addmm]\n",
    )
    t = resolve_target(Options("cpu", None, (str(f),), None, False))
    by_op = {c.op: c.policy for c in registration.cases(t)}
    assert by_op["aten::mm"] is Listing.REGISTERED_ONLY and by_op["aten::addmm"] is Policy.FP32


def test_intercept_registered_sees_the_call_and_leaves_no_kernel() -> None:
    """The C++-visible interception the unlisted check falls back on (a backend's own kernel
    beside a CompositeImplicitAutograd one hides the call from the Python dispatcher)."""
    import torch

    from reference_impl.harness.calls import Intercepted, intercept_registered

    a, b = torch.randn(2, 3), torch.randn(3, 2)
    key = torch._C.DispatchKey.AutogradCPU
    with (
        intercept_registered("aten::mm", key) as calls,
        pytest.raises(Intercepted),
        torch.autocast("cpu", dtype=torch.bfloat16),
    ):
        torch.mm(a, b)
    assert [c.op for c in calls] == ["aten::mm"]
    assert all(t.dtype == torch.bfloat16 for t in calls[0].tensors())
    assert torch.mm(a, b).dtype == torch.float32  # the kernel is gone after the block


def test_vendor_environment_is_set_where_unset_before_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``vendor.environment``: what the backend needs to load offline, set before the suite
    imports the module (where unset; a value already set is kept) and named in the header."""
    import sys

    (tmp_path / "acme_vendor_env_mod.py").write_text(
        "import os\nSEEN = (os.environ.get('ACME_OFFLINE'), os.environ.get('ACME_KEPT'))\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("ACME_OFFLINE", raising=False)
    monkeypatch.setenv("ACME_KEPT", "mine")
    f = _file(
        tmp_path,
        "vendor:\n  package: acme-torch\n  version: '1.2.3'\n  module: acme_vendor_env_mod\n"
        "  environment: {ACME_OFFLINE: '1', ACME_KEPT: '1'}\n"
        "ops:\n  lower_precision_fp: [aten::mm]\n",
    )
    t = resolve_target(Options("cpu", None, (str(f),), None, False))
    assert sys.modules["acme_vendor_env_mod"].SEEN == ("1", "mine")
    assert "environment for acme_vendor_env_mod: ACME_OFFLINE=1, ACME_KEPT=mine" in t.describe()
    assert "set by the suite before importing it" in t.describe()


def test_vendor_environment_already_loaded_says_to_set_it_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module loaded before the suite ran (an entry point on ``import torch``, as torch-tpu's)
    got no benefit from the suite setting the variable: the note says so."""
    from autocast_spec.common import frozen_map
    from autocast_spec.model import VendorRelease
    from reference_impl.harness.devices import import_vendor

    monkeypatch.delenv("ACME_OFFLINE", raising=False)
    done = import_vendor(VendorRelease("acme", "1", "json", frozen_map({"ACME_OFFLINE": "1"})))
    assert done.preloaded and done.set_here == ("ACME_OFFLINE",)
    assert "had already loaded" in done.note() and "environment that starts Python" in done.note()


def test_vendor_environment_names_are_validated(tmp_path: Path) -> None:
    f = _file(
        tmp_path,
        "vendor:\n  package: acme-torch\n  version: '1.2.3'\n  module: acme\n"
        "  environment: {'NOT A NAME': '1'}\nops:\n  lower_precision_fp: [aten::mm]\n",
    )
    with pytest.raises(SpecError):
        load_installed_spec([f], check_registry=False)


def test_reproduction_of_a_vendor_operator_is_python() -> None:
    """A vendor's own operator (torch_ipex::nms) is called as torch.ops.<namespace>, as aten's are."""
    from conformance.kit.case import Case
    from conformance.kit.verdict import reproduction

    case = Case("op_policy", "cpu", "bfloat16", "fp32", "torch_ipex::nms")
    text = reproduction(case, None, "torch_ipex::nms")
    assert "out = torch.ops.torch_ipex.nms.default(" in text and "torch_ipex::" not in text


def test_an_operator_of_a_namespace_not_loaded_is_not_a_registry_problem(tmp_path: Path) -> None:
    """A vendor's own operator (torch_ipex::) is in the registry only where its package is
    loaded: its name is checked there, while a misspelt aten op is refused anywhere."""
    load_installed_spec([_file(tmp_path, "ops:\n  lower_precision_fp: [aten::mm, acme_ns_not_loaded::op]\n")])
    with pytest.raises(SpecError) as e:
        load_installed_spec([_file(tmp_path, "ops:\n  lower_precision_fp: [aten::not_an_op_at_all]\n")])
    assert "aten::not_an_op_at_all" in str(e.value)

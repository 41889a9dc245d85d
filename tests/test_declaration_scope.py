"""Declarations scoped to ops and devices: a known bug that names ``ops`` explains an observation
of those ops only (a list of booleans names no op), and a functorch gap that names ``devices``
holds on those devices only, where a transform may carry several gaps."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from autocast_spec.builders import build_ops
from autocast_spec.common import SourceLoc
from autocast_spec.known_bugs import KnownBug
from autocast_spec.model import Spec
from autocast_spec.versions import Applicability
from autocast_spec.yaml_source import YamlDocument
from conformance.kit.case import Case
from conformance.kit.verdict import Observation, expect
from reference_impl.spectools.installed_spec import load_installed_spec

SEEN = "False, False, False"
BUG = KnownBug(
    id="planted-skips-the-cache",
    check="cache.scenario",
    observed=(SEEN,),
    reason="planted",
    source="none",
    torch_versions=">=2.0",
    loc=SourceLoc("spec/rules.yaml", 1),
    ops=("aten::bmm",),
)


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_installed_spec()


def _verdict(spec: Spec, op: str) -> str:
    rules = replace(spec.rules, known_bugs=(BUG,))
    target = SimpleNamespace(device="cpu", spec=replace(spec, rules=rules), device_spec=spec.devices["cpu"])
    seen = Observation(Case("cache", "cpu", torch.bfloat16, op=op), "cache.scenario", "planted", "True", SEEN)
    try:
        expect(target, seen)  # type: ignore[arg-type]
    except pytest.xfail.Exception:
        return "xfail"
    except pytest.fail.Exception:
        return "fail"
    return "pass"


def test_a_known_bug_naming_ops_explains_only_those(spec: Spec) -> None:
    assert _verdict(spec, "aten::bmm") == "xfail"
    assert _verdict(spec, "aten::mm") == "fail"  # the same observation of another op is not the bug


def test_a_known_bug_without_ops_explains_every_op() -> None:
    unscoped = replace(BUG, ops=())
    assert unscoped.explains("cache.scenario", "cpu", SEEN, "aten::mm")
    assert not BUG.explains("cache.scenario", "cpu", SEEN, "aten::mm")


def test_functorch_gaps_by_device() -> None:
    gaps = {
        "vmap": [
            {"reason": "on cpu", "devices": ["cpu"], "source": "none", "seen_on": "2.8"},
            {"reason": "on cuda", "devices": ["cuda"], "source": "none", "seen_on": "2.11"},
        ],
        "grad": {"reason": "everywhere", "source": "https://github.com/pytorch/pytorch/issues/1"},
    }
    doc = YamlDocument(
        "ops.yaml", {"ops": {"aten::mm": {"samples": [{"args": []}], "functorch_gaps": gaps}}}, {}
    )
    info = build_ops(doc, Applicability("2.13", frozenset()))["aten::mm"]
    assert info.functorch_gap("vmap", "cpu") == "on cpu (no public report; seen on torch 2.8)"
    assert info.functorch_gap("vmap", "cuda") == "on cuda (no public report; seen on torch 2.11)"
    assert info.functorch_gap("vmap", "xpu") is None
    assert info.functorch_gap("grad", "xpu") == "everywhere (https://github.com/pytorch/pytorch/issues/1)"


def test_a_known_bug_of_torch_s_surface_names_the_case_s_device_and_dtypes() -> None:
    """An observation may leave {device}, {dtype} and {default_dtype} to the case: the same torch
    bug then explains what it gives on cpu and on a vendor's device, and nothing else (the
    acme example met the cpu-only wording as 18 failures)."""
    bug = KnownBug(
        "b", "call_forms.region",
        ("returns ({dtype}); is_autocast_enabled('{device}') False -> True; "
         "get_autocast_dtype('{device}') torch.{default_dtype} -> torch.{dtype}",),
        "r", "none", ">=2.13", SourceLoc("spec/rules.yaml", 1), seen_on="2.13.0",
    )  # fmt: skip
    acme = (
        "returns (bfloat16); is_autocast_enabled('acme') False -> True; "
        "get_autocast_dtype('acme') torch.float16 -> torch.bfloat16"
    )
    assert bug.explains("call_forms.region", "acme", acme, dtypes=("bfloat16", "float16"))
    assert not bug.explains("call_forms.region", "cpu", acme, dtypes=("bfloat16", "float16"))
    assert not bug.explains("call_forms.region", "acme", acme, dtypes=("float16", "float16"))
    assert not bug.explains("call_forms.value", "acme", acme, dtypes=("bfloat16", "float16"))

"""spec/compiled.yaml value_divergences: loaded with their sources, and judged as declared.

A compiled op's values against eager autocast pass within the tolerance, are xfail within a
declared bound (with the reason and the source), and fail beyond it, on a host the
declaration does not name, and where nothing is declared.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from autocast_spec.common import SourceLoc, Tolerance
from autocast_spec.model import Spec, ValueDivergence
from conformance.kit import divergences
from conformance.kit.case import Case
from conformance.kit.divergences import Run
from conformance.kit.verdict import DeclarationNotObserved, expect
from reference_impl.modes.batch import Config
from reference_impl.modes.run import Mode

TOL = Tolerance(atol=0.01, rtol=0.016)
DECL = ValueDivergence(
    op="aten::mm",
    mode="compile",
    max_error=0.05,
    reason="planted",
    host="any",
    config="default",
    source="none",
    loc=SourceLoc("spec/compiled.yaml", 1),
    dtype="bfloat16",
    backend="inductor",
    seen_on="2.13.0",
)


def _verdict(
    spec: Spec, error: float, declared: ValueDivergence | None, tol: Tolerance | None = TOL
) -> tuple[str, str]:
    eager = torch.zeros(4)
    got = eager.clone()
    got[1] = error
    config = Config(declared.config) if declared is not None else Config.DEFAULT
    run = Run(Mode.COMPILE, "inductor", config, torch.bfloat16, "aten::mm", torch.float32)
    seen = divergences.values_observation(
        replace(spec, value_divergences=(declared,) if declared is not None else ()),
        run,
        Case("modes", "cpu", torch.bfloat16, op="aten::mm"),
        "modes.matches_eager",
        "compile aten::mm",
        eager,
        got,
        tol,
        (),
        "r",
    )
    try:
        expect(SimpleNamespace(device="cpu", spec=spec, device_spec=spec.devices["cpu"]), seen)  # type: ignore[arg-type]
    except pytest.xfail.Exception as e:
        return "xfail", str(e)
    except pytest.fail.Exception as e:
        return "fail", str(e)
    return "pass", ""


@pytest.mark.parametrize(
    ("error", "declared", "status"),
    [
        (0.005, None, "pass"),
        (0.02, None, "fail"),
        (0.02, DECL, "xfail"),
        (0.0499, DECL, "xfail"),
        (0.06, DECL, "fail"),  # beyond the declared bound
    ],
)
def test_a_compiled_value_against_eager(
    spec: Spec, error: float, declared: ValueDivergence | None, status: str
) -> None:
    verdict, why = _verdict(spec, error, declared)
    assert verdict == status, why
    if status == "xfail":
        assert (
            why.startswith(divergences.DECLARED_VALUES) and "planted" in why and "seen on torch 2.13.0" in why
        ), why
    if status == "fail" and declared is not None:
        assert "over the declared bound 0.05" in why, why


def test_a_declaration_not_observed_passes_with_a_warning(spec: Spec) -> None:
    with pytest.warns(DeclarationNotObserved, match=r"spec/compiled.yaml:1: declared value divergence"):
        assert _verdict(spec, 0.005, DECL) == ("pass", "")  # within the tolerance
    with pytest.warns(DeclarationNotObserved, match="narrow or remove the declaration"):
        assert _verdict(spec, 0.0, DECL, tol=None) == ("pass", "")  # bitwise equal


def test_a_declaration_for_another_host_does_not_apply(spec: Spec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(divergences, "host_capability", lambda: "avx512")
    verdict, why = _verdict(spec, 0.02, replace(DECL, host="avx2"))
    assert verdict == "fail" and "for host avx2 only (this host: avx512)" in why, why
    assert _verdict(spec, 0.02, replace(DECL, host="avx512"))[0] == "xfail"


def test_without_a_tolerance_values_must_be_bitwise_equal(spec: Spec) -> None:
    assert _verdict(spec, 1e-6, None, tol=None)[0] == "fail"
    assert _verdict(spec, 0.0, None, tol=None)[0] == "pass"
    assert _verdict(spec, 1e-6, replace(DECL, config="emulate_precision_casts"), tol=None)[0] == "xfail"


def test_declarations_load_and_cite_a_source(spec: Spec) -> None:
    assert spec.value_divergences, "spec/compiled.yaml declares no value divergence"
    for d in spec.value_divergences:
        assert d.source.startswith("https://") or (d.source == "none" and d.seen_on), d
        assert d.max_error > 0 and d.loc.file.endswith("compiled.yaml"), d


def test_a_declaration_covers_only_its_run() -> None:
    d = replace(DECL, inputs="float32")
    assert d.covers("compile", "inductor", "default", "aten::mm", "bfloat16", "float32")
    assert not d.covers("compile", "inductor", "default", "aten::mm", "bfloat16", "lower")
    assert not d.covers("compile", "inductor", "emulate_precision_casts", "aten::mm", "bfloat16", "float32")
    assert not d.covers("compile", "aot_eager", "default", "aten::mm", "bfloat16", "float32")
    assert not d.covers("compile", "inductor", "default", "aten::mm", "float16", "float32")

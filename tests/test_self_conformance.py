"""Self-conformance: the suite with reference_impl.autocast standing in for the backend.

``--implementation reference`` installs the reference's kernels at the device's Autocast
key for the whole run and uses ``reference_impl.autocast`` wherever the suite enters
autocast. Both that run and the native one must pass, with the same tests and the same
outcome for each: a difference points at a bug in the reference or in native autocast
(or in the spec between them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.suite_runs import outcomes, run_suite, skip_reasons, summary

# Natively, torch.autocast("cuda") disables itself where there is no GPU, so the context
# tests skip; the reference has no availability check and runs them (on FakeTensors).
# That is the one difference allowed: native skipped for this reason, reference passed.
NATIVE_DOES_NOT_ENABLE = "does not enable on this machine"
KNOWN_BUG = "known bug "  # conformance.kit.verdict.XFAIL_PREFIX

RUNS = {
    "cpu": ("--backend", "cpu", "--dtype", "all"),
    "cuda-policy-only": ("--backend", "cuda", "--policy-only", "--dtype", "all"),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_reference_and_native_agree(name: str, tmp_path: Path) -> None:
    args = RUNS[name]
    native = run_suite(*args, f"--junitxml={tmp_path / 'native.xml'}")
    reference = run_suite(*args, "--implementation", "reference", f"--junitxml={tmp_path / 'ref.xml'}")
    assert native.returncode == 0, "native:\n" + summary(native)
    assert reference.returncode == 0, "reference:\n" + summary(reference)
    a, b = outcomes(tmp_path / "native.xml"), outcomes(tmp_path / "ref.xml")
    assert len(a) > 1000 and "passed" in a.values(), summary(native)
    assert a.keys() == b.keys(), sorted(a.keys() ^ b.keys())[:20]
    why = skip_reasons(tmp_path / "native.xml")
    allowed = {t for t in a if a[t] == "skipped" and b[t] == "passed" and NATIVE_DOES_NOT_ENABLE in why[t]}
    # The reference follows the rules; where this torch has a bug spec/rules.yaml declares,
    # native reports it xfail (JUnit: skipped, "known bug <id> ...") and the reference passes.
    known = {t for t in a if a[t] == "skipped" and b[t] == "passed" and KNOWN_BUG in why[t]}
    differ = sorted(t for t in a if a[t] != b[t] and t not in allowed | known)
    assert not differ, [f"{t}: native {a[t]}, reference {b[t]}" for t in differ[:20]]
    if name == "cpu":  # torch.autocast("cpu") always enables: nothing else may differ
        assert not allowed, sorted(allowed)


def test_reference_run_says_so() -> None:
    p = run_suite("--backend", "cpu", "--implementation", "reference", "--co", "-v")  # -v: the header
    assert p.returncode == 0, summary(p)
    assert "reference_impl.autocast" in p.stdout, p.stdout[:2000]

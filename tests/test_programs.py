"""The programs category (conformance/categories/programs.py): its cases, and planted bugs, one
or more per dimension of the grammar, each failing a generated-programs test that passes clean,
within the default budget (tests/helpers/program_plants.py)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

import pytest
import torch
from helpers.program_plants import PLANTS
from helpers.suite_runs import run_suite, summary

from conformance import registry
from conformance.categories import programs
from conformance.categories.programs import Generated
from conformance.kit.case import Case
from conformance.target import Options, Target, resolve_target
from reference_impl.modes.run import Mode
from reference_impl.programs.records import AutocastState, CallResult, Record, Side
from reference_impl.programs.strategies import drawn_programs

C, E, A = Mode.COMPILE, Mode.EXPORT, Mode.AOTI
# Each plant, and the test (pass and dimension) whose generated programs must catch it.
CAUGHT_BY: dict[str, Generated] = {
    "guards": Generated(C, focus="second_state"),
    "recompile": Generated(C, focus="second_shape"),
    "decorator": Generated(C, focus="decorator"),
    "legacy_alias": Generated(C, focus="legacy"),
    "nested_device": Generated(C, focus="nested"),
    "deep_break_resume": Generated(C, focus="break"),
    "custom_fwd_cast": Generated(C, focus="custom_function"),
    "checkpoint": Generated(C, focus="checkpoint"),
    "hop_cond": Generated(C, focus="cond"),
    "hop_invoke_subgraph": Generated(C, focus="nested_compile_region"),
    "hop_flex": Generated(C, focus="flex"),
    "aot_runtime": Generated(C, focus="module"),
    "aot_runtime_inference": Generated(C, focus="module"),
    "export_drop_region": Generated(E, config="nonstrict", focus="module"),
    "run_decompositions": Generated(E, config="nonstrict-decomposed"),
    "freezing": Generated(C, "inductor", "freezing"),
    "aoti": Generated(A),
}


# Plants the default budget does not catch on torch 2.13.0 (seeded: the same every run), with
# why. Each stays a test: it fails once the default budget catches it (then remove it here), and
# reports xfail until then. None now: each is caught because each focus of torch.compile's tests
# draws only programs that show its dimension (reference_impl/programs/foci.py).
NOT_CAUGHT: dict[str, str] = {}


@pytest.fixture(scope="module")
def target() -> Target:
    opts = Options("cpu", "bfloat16", (), None, False, modes=("compile", "export", "aoti"))
    resolved = resolve_target(dataclasses.replace(opts, compile_backends=("aot_eager", "inductor")))
    return dataclasses.replace(resolved, programs_shrink=0.0)  # the failure as drawn: no shrinking


def case_of(p: Generated) -> Case[Generated]:
    return Case("programs", "cpu", torch.bfloat16, params=p)


def test_every_plant_has_its_case_and_the_cases_exist(target: Target) -> None:
    assert set(CAUGHT_BY) == set(PLANTS)
    ids = {c.id for c in registry.cases(target, programs.cases)}
    assert {case_of(p).id for p in CAUGHT_BY.values()} <= ids


CLEAN: dict[Generated, str] = {}


def verdict(target: Target, case: Case[Generated]) -> str:
    try:
        programs.check(target, case)
    except pytest.xfail.Exception as e:  # before fail: XFailed is a Failed
        return f"xfail: {e}"
    except pytest.fail.Exception as e:
        return f"fail: {e}"
    return "pass"


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No compiled artifact of a planted run outlives it: torch's on-disk caches are off for the
    test (a graph compiled under a plant would be served to a later clean run) and Dynamo's are
    reset after it."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        yield monkeypatch
        monkeypatch.undo()
    torch._dynamo.reset()


# Set in the process of test_every_plant_fails_its_test_in_a_process_of_its_own, where the planted
# tests run.
HERE = "AUTOCAST_PROGRAM_PLANTS_HERE"


def test_every_plant_fails_its_test_in_a_process_of_its_own() -> None:
    """The planted tests below, in a process of their own (forked from a warm one that has run no
    op: helpers/warm.py). A plant acts on torch's compile stack, and in a worker that has run other
    test modules first that stack's state is theirs: in one CI run three plants' verdicts changed
    with it (the clean second_shape programs lost their gradients; the module programs no longer
    showed the runtime wrapper's plant), while every plant fails its test in a fresh process."""
    p = run_suite("-k", "test_a_planted_bug", plugin_env={HERE: "1"}, paths=("tests/test_programs.py",))
    assert p.returncode == 0 and f"{len(CAUGHT_BY)} passed" in p.stdout, summary(p)


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_a_planted_bug_fails_the_generated_programs(
    target: Target, name: str, isolated: pytest.MonkeyPatch
) -> None:
    if not os.environ.get(HERE):
        pytest.skip("runs in a process of its own: test_every_plant_fails_its_test_in_a_process_of_its_own")
    p = CAUGHT_BY[name]
    case = case_of(p)
    if p not in CLEAN:
        CLEAN[p] = verdict(target, case)
    assert not CLEAN[p].startswith("fail"), CLEAN[p]
    PLANTS[name](isolated)
    got = verdict(target, case)
    if name in NOT_CAUGHT:
        assert not got.startswith("fail"), f"{name} is caught now: remove it from NOT_CAUGHT"
        pytest.xfail(f"{name}: not caught within the default budget ({case.id}): {NOT_CAUGHT[name]}")
    assert got.startswith("fail"), f"{name}: {case.id} {got}"


@pytest.mark.slow
def test_the_generated_programs_pass_clean_in_both_dtypes() -> None:
    """The default budget of every compile and export test, both dtypes, passes on this torch
    (known bugs and value bounds declared); the planted tests above see bfloat16 only."""
    p = run_suite(
        "--backend", "cpu", "--dtype", "all", "-m", "programs", "--mode", "compile", "--mode", "export",
        "--programs-shrink", "0", "-n", "2", paths=("conformance/test_programs.py",),
    )  # fmt: skip
    assert p.returncode == 0 and " passed" in p.stdout, summary(p)


def test_a_pass_that_fails_before_its_call_is_judged_where_eagers_backward_raised(target: Target) -> None:
    """Eager's first call ran and its backward raised; the pass failed before its first call (a
    trace, an export) with an error it does not raise without autocast: a failure of the pass,
    reported. Before, eager's backward error hid it and the program passed as eager."""
    (program,) = drawn_programs(target.spec, 1, 0)
    state = AutocastState({"cpu": False}, {"cpu": "bfloat16"}, True, 0)
    backward = "RuntimeError: linalg_eig_backward: ill-defined"
    eager = Side(None, CallResult((), None, state), None, backward, None)
    got = Side("Unsupported: a trace failed", None, None, None, None)
    record = Record(program, "aot_eager", eager, got, (), None, None, True, "", 0.0)
    (seen,) = programs.observations(target, case_of(CAUGHT_BY["guards"]), record)
    assert seen.observed == "raises Unsupported: a trace failed", seen

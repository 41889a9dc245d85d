"""The semantic categories are derived from the spec: each rules.yaml knob changes what
the suite checks, the category registry is the one list of categories, and
mandatory_core names are checked against it."""

from __future__ import annotations

import json
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from autocast_spec.files import SCHEMA_FILE, bundled_spec_dir
from autocast_spec.problems import SpecError
from conformance import registry
from conformance.categories import (
    cache,
    context,
    custom_function,
    custom_op,
    eligibility,
    threads,
    transitions,
)
from conformance.kit.case import Case
from conformance.target import Options, Target, resolve_target
from reference_impl.harness.state import autocast_state_kept
from reference_impl.spectools.installed_spec import load_installed_spec

DTYPE = "bfloat16"


@pytest.fixture(scope="module")
def cpu() -> Target:
    return resolve_target(Options("cpu", DTYPE, (), None, False), categories=registry.mandatory_able())


def with_rules(t: Target, part: str | None = None, **changes: Any) -> Target:
    """``t`` with rules (or one part of them: cache, context, eligibility, custom_ops) changed."""
    rules = t.spec.rules
    new = (
        replace(rules, **{part: replace(getattr(rules, part), **changes)})
        if part
        else replace(rules, **changes)
    )
    return replace(t, spec=replace(t.spec, rules=new))


def _cache_case(t: Target, kind: str) -> Case:
    return next(c for c in cache.cases(t) if c.variant is cache.Scenario(kind))


@pytest.mark.parametrize(
    ("kind", "knob", "value"),
    [
        ("non_leaf", "leaf_only", False),
        ("no_grad_inputs", "requires_grad_only", False),
        ("view", "exclude_views", False),
        ("nested_exit", "cleared_at", "every_exit"),
        ("weights", "source_dtypes", ()),
    ],
)
def test_cache_knob_changes_expectation(cpu: Target, kind: str, knob: str, value: Any) -> None:
    case = _cache_case(cpu, kind)
    before = cache.scenario(cpu, case)
    assert before.expected == before.observed  # native torch 2.13 follows the bundled rules
    after = cache.scenario(with_rules(cpu, "cache", **{knob: value}), case)
    assert after.expected != before.expected, f"rules.cache.{knob}={value!r} changed nothing"


def test_cache_policies_drive_the_ops(cpu: Target) -> None:
    assert cache.cases(cpu)
    assert not cache.cases(with_rules(cpu, "cache", policies=()))
    assert "cache" not in registry.expected_categories(
        next(iter(cpu.device_spec.ops.values())).policy, with_rules(cpu, "cache", policies=()).spec.rules
    )


@pytest.mark.parametrize(("knob", "value"), [("thread_local", False), ("new_thread_enabled", True)])
def test_thread_knobs_change_expectation(cpu: Target, knob: str, value: bool) -> None:
    case = Case("threads", "cpu", DTYPE, variant=threads.ThreadReads(threads.When.PARENT_INSIDE, "enabled"))
    assert threads.state(cpu, case).expected is False
    assert threads.state(with_rules(cpu, "context", **{knob: value}), case).expected is True


def _kinds(t: Target) -> set[str]:
    return {c.label for c in eligibility.cases(t)}


@pytest.mark.parametrize(
    ("part", "knob", "value", "gone"),
    [
        ("eligibility", "never_cast", (), {"float64"}),
        ("eligibility", "floating_only", False, {"int64", "bool"}),
        ("eligibility", "same_device_only", False, {"other_device"}),
        (None, "out_of_place_only", False, {"inplace", "out"}),
    ],
)
def test_eligibility_knobs_drive_the_variants(
    cpu: Target, part: str | None, knob: str, value: Any, gone: set[str]
) -> None:
    assert gone <= _kinds(cpu)
    assert not gone & _kinds(with_rules(cpu, part, **{knob: value}))


def test_eligibility_rules_drive_custom_fwd(cpu: Target) -> None:
    applied = custom_function.Applied(True, custom_function.CastInputs.FLOAT32, "float64")
    case = Case("custom_function", "cpu", DTYPE, variant=applied)
    assert custom_function.combination(cpu, case).expected["fwd_input"] == "float64"
    relaxed = with_rules(cpu, "eligibility", never_cast=())
    assert custom_function.combination(relaxed, case).expected["fwd_input"] == "float32"


def test_custom_op_devices_drive_the_cases(cpu: Target) -> None:
    assert custom_op.cases(cpu)
    assert not custom_op.cases(with_rules(cpu, "custom_ops", register_autocast_devices=()))


class _KeepsStateOnException:
    """An autocast that leaves its state behind when an exception escapes."""

    def __init__(self, device: str, dtype: torch.dtype | None = None, enabled: bool = True) -> None:
        self.device, self.dtype, self.enabled = device, dtype, enabled

    def __enter__(self) -> None:
        self.prev = (torch.is_autocast_enabled(self.device), torch.get_autocast_dtype(self.device))
        torch.set_autocast_enabled(self.device, self.enabled)
        if self.dtype is not None:
            torch.set_autocast_dtype(self.device, self.dtype)

    def __exit__(self, exc_type: Any, *rest: Any) -> bool:
        if exc_type is None:
            torch.set_autocast_enabled(self.device, self.prev[0])
            torch.set_autocast_dtype(self.device, self.prev[1])
        return False


@pytest.mark.parametrize("restores", [True, False])
def test_exception_knob_decides_the_check(cpu: Target, restores: bool) -> None:
    t = with_rules(cpu, "context", exception_restores_state=restores)
    stand_in = type("T", (), {"device": "cpu", "spec": t.spec, "autocast_impl": _KeepsStateOnException})()
    with autocast_state_kept("cpu"):
        seen = context.exception(stand_in, torch.bfloat16)  # type: ignore[arg-type]
    assert (seen.expected != seen.observed) is restores, (seen.expected, seen.observed)


def _steps(t: Target, steps: list[tuple[str, dict[str, Any]]]) -> None:
    machine = transitions.make_machine(t, DTYPE)()
    try:
        machine.choose_ops([0])
        for name, kw in steps:
            getattr(machine, name)(**kw)
            machine.state_matches()
    finally:
        machine.teardown()


NESTED_DTYPE = [
    ("enter_region", {"enabled": True, "dtype": torch.bfloat16, "cache": None}),
    ("call_with_weights", {"pick": 0}),
    ("enter_region", {"enabled": True, "dtype": torch.float16, "cache": None}),
    ("call_with_weights", {"pick": 0}),
]
INFERENCE = [
    ("enter_region", {"enabled": True, "dtype": None, "cache": None}),
    ("enter_grad_mode", {"mode": "inference"}),
    ("call_with_weights", {"pick": 0}),
    ("call_with_weights", {"pick": 0}),
]
INFERENCE_EXIT = [
    ("enter_region", {"enabled": True, "dtype": None, "cache": None}),
    ("enter_grad_mode", {"mode": "inference"}),
    ("set_enabled", {"enabled": False}),
    ("exit", {}),
]


@pytest.mark.parametrize(
    ("steps", "part", "knob", "value"),
    [
        (NESTED_DTYPE, None, "known_bugs", ()),  # key source_and_dtype, torch's bug undeclared
        (INFERENCE, "cache", "in_inference_mode", True),
        (INFERENCE_EXIT, "context", "inference_mode_exit_restores_enabled", False),
    ],
    ids=["cache.key", "cache.in_inference_mode", "context.inference_mode_exit_restores_enabled"],
)
def test_transition_knobs_change_the_model(
    cpu: Target, steps: list[tuple[str, dict[str, Any]]], part: str | None, knob: str, value: Any
) -> None:
    _steps(cpu, steps)  # native torch 2.13 follows the bundled rules
    with pytest.raises((AssertionError, pytest.fail.Exception)):
        _steps(with_rules(cpu, part, **{knob: value}), steps)


@pytest.mark.parametrize("category", [c for c in registry.CATEGORIES if c.generators], ids=lambda c: c.name)
def test_a_category_marks_its_own_cases(cpu: Target, category: registry.Category) -> None:
    """``-m <category>`` selects the category's tests: every case a category's generators
    make carries that category (its pytest marker and the category certification records)."""
    for gen in category.generators:
        others = sorted({c.category for c in registry.cases(cpu, gen)} - {category.name})
        assert not others, f"generator {gen} of category {category.name} makes cases of {others}"


def test_registry_is_the_one_list(cpu: Target) -> None:
    from conformance.plugin import CATEGORY_MARKERS

    names = [c.name for c in registry.CATEGORIES]
    assert len(names) == len(set(names))
    assert set(names) <= set(CATEGORY_MARKERS)
    assert set(cpu.spec.rules.mandatory_core) <= registry.mandatory_able()
    assert all(registry.category_of(g) for g in registry.GENERATORS)
    # every test module of the suite is a category or belongs to one
    suite = Path(registry.__file__).parent
    modules = {p.stem.removeprefix("test_") for p in suite.glob("test_*.py")}
    assert modules - set(names) <= {
        "op_policy", "entry_agreement", "hypothesis", "jit_limitations", "modes", "no_autocast"
    }  # fmt: skip


def test_known_bugs_may_name_every_check_of_the_suite() -> None:
    """The schema's list of checks a known bug may name is the registry's, derived from the
    category modules and the modes: a check added to the suite can be declared at once, and
    a name no check has is refused by validation."""
    schema = json.loads((bundled_spec_dir() / SCHEMA_FILE).read_text())

    def known_bug_checks(node: Any) -> list[tuple[str, ...]]:
        """One list per known_bugs in the schema (the rules' and a vendor device file's)."""
        if isinstance(node, dict):
            found = [c for v in node.values() for c in known_bug_checks(v)]
            if "known_bugs" in node and "items" in node["known_bugs"]:
                found.append(tuple(sorted(node["known_bugs"]["items"]["properties"]["check"]["enum"])))
            return found
        return [c for v in node for c in known_bug_checks(v)] if isinstance(node, list) else []

    lists = known_bug_checks(schema)
    assert len(lists) == 2 and all(checks == registry.all_checks() for checks in lists), lists


def test_mandatory_core_names_are_checked(tmp_path: Path) -> None:
    spec = tmp_path / "spec"
    shutil.copytree(bundled_spec_dir(), spec)
    rules = spec / "rules.yaml"
    rules.write_text(rules.read_text().replace("mandatory_core: [", "mandatory_core: [contxt, "))
    with pytest.raises(SpecError) as e:
        load_installed_spec([spec], categories=registry.mandatory_able())
    (problem,) = e.value.problems
    assert problem.file.endswith("rules.yaml") and problem.line > 0
    assert "'contxt' is not a test category" in problem.message and "did you mean context" in problem.message
    load_installed_spec([spec])  # without the registry the loader cannot know the names


def test_new_thread_sees_defaults_natively() -> None:
    """The fact the thread rules encode, on the installed torch."""
    seen: list[bool] = []
    with torch.autocast("cpu"):
        t = threading.Thread(target=lambda: seen.append(torch.is_autocast_enabled("cpu")))
        t.start()
        t.join()
    assert seen == [False]


def test_no_argument_query_check_names_torch_bug(cpu: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """context.no_argument_query: on torch 2.13 the no-argument is_autocast_enabled() ignores
    the cpu region (pytorch#191796): reported xfail through its known bug; undeclared, it fails;
    with a query that answers for the region the device opened, it passes."""
    from conformance.categories import context
    from conformance.kit.verdict import expect

    lower = torch.bfloat16
    declared = [b for b in cpu.spec.rules.known_bugs if b.check == context.NO_ARGUMENT_QUERY]
    assert declared and "191796" in declared[0].source, declared
    with pytest.raises(pytest.xfail.Exception, match="191796"):
        expect(cpu, context.no_argument_query(cpu, lower))
    bare = with_rules(cpu, known_bugs=tuple(b for b in cpu.spec.rules.known_bugs if b not in declared))
    with pytest.raises(pytest.fail.Exception, match="inside False"):
        expect(bare, context.no_argument_query(bare, lower))
    # a torch whose no-argument form answers for the device of the open region
    own = torch.is_autocast_enabled
    monkeypatch.setattr(torch, "is_autocast_enabled", lambda device=None: own(device or cpu.device))
    expect(bare, context.no_argument_query(bare, lower))


@pytest.mark.parametrize("op", ["aten::geqrf", "aten::mm"])
def test_no_derivative_declaration_must_match_the_backward(cpu: Target, op: str) -> None:
    """autograd: an op the catalog declares without a derivative is skipped with the reason; the
    declaration taken away (geqrf) or put on an op whose backward runs (mm), the check fails."""
    from conformance.categories import autograd
    from conformance.kit.verdict import expect

    case = next(c for c in autograd.cases(cpu) if c.op == op)
    info = cpu.spec.ops[op]
    declared = bool(info.no_derivative)
    assert declared is (op == "aten::geqrf"), info
    if declared:
        with pytest.raises(pytest.skip.Exception, match="no derivative"):
            expect(cpu, autograd.grad_dtypes(cpu, case))
    else:
        expect(cpu, autograd.grad_dtypes(cpu, case))
    flipped = replace(info, no_derivative="" if declared else "planted: no derivative")
    other = replace(cpu, spec=replace(cpu.spec, ops={**cpu.spec.ops, op: flipped}))
    with pytest.raises(pytest.fail.Exception, match="backward"):
        expect(other, autograd.grad_dtypes(other, case))


def test_a_kernel_that_passes_other_tensors_is_reported_not_raised(cpu: Target) -> None:
    """A kernel whose call below Autocast carries one tensor more than the call (cuDNN's RNN
    passes its flat weight buffer) or one fewer is a mismatch the transition check reports
    (``extra``, ``missing``), not an error of the suite."""
    model = transitions.SpecModel(cpu.spec, cpu.device_spec, True, torch.bfloat16, True, "source", False)
    a, b = torch.ones(2, 2), torch.ones(2, 2)
    expected = [transitions.Expected(a, "float32 uncast"), transitions.Expected(b, "float32 uncast")]
    assert model.observe(expected, [a, b, torch.ones(1, dtype=torch.float16)]) == [
        "float32 uncast", "float32 uncast", "float16 extra"
    ]  # fmt: skip
    assert model.observe(expected, [a]) == ["float32 uncast", "missing"]

"""The generated-program machinery (reference_impl.programs): grammar coverage, rendering,
running eagerly and through each pass, the standalone script, the ops read from a program.

Hypothesis runs here with a fixed seed (the same programs every run) and an example database
of two layers (:data:`DATABASE`): the committed ``tests/hypothesis-examples/`` (read only; what
CI replays first) and the local ``.hypothesis/examples/`` (gitignored), where a failing
program is saved and replayed on the next local run. To make CI replay one, copy its key
directory from ``.hypothesis/examples/`` into ``tests/hypothesis-examples/`` and commit it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase, MultiplexedDatabase, ReadOnlyDatabase

from autocast_spec.model import Spec
from reference_impl.programs import (
    NOT_APPLICABLE,
    OK,
    PASSES,
    CallResult,
    Grammar,
    Program,
    Record,
    features,
    grammar_features,
    program_ops,
    run,
    script_for,
)
from reference_impl.programs.reduce import in_float32, reduce, size, without_autocast
from reference_impl.programs.strategies import drawn_programs
from reference_impl.programs.tree import (
    Autocast,
    CacheSwitch,
    Const,
    Context,
    Form,
    GradMode,
    Holder,
    OpCall,
    Ref,
    Region,
    RegionForm,
    SecondKind,
    walk,
)

REPO = Path(__file__).resolve().parent.parent
DATABASE = MultiplexedDatabase(
    ReadOnlyDatabase(DirectoryBasedExampleDatabase(REPO / "tests" / "hypothesis-examples")),
    DirectoryBasedExampleDatabase(REPO / ".hypothesis" / "examples"),
)
SEED = 37  # the number: any fixed value keeps the runs the same
COVERAGE_EXAMPLES = 300  # the default budget the coverage check draws within
DEVICE = "cpu"


def program_settings(n: int) -> settings:
    return settings(
        max_examples=n,
        deadline=None,
        database=DATABASE,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


def draw(spec: Spec, n: int) -> list[Program]:
    """The first ``n`` programs the fixed seed draws (generation only)."""
    return drawn_programs(spec, n, SEED, DEVICE)


@pytest.fixture(scope="module")
def drawn(spec: Spec) -> list[Program]:
    """:data:`COVERAGE_EXAMPLES` programs drawn with the fixed seed."""
    return draw(spec, COVERAGE_EXAMPLES)


@pytest.fixture(scope="module")
def simplest(drawn: list[Program]) -> Program:
    """The first drawn program that is one lower_precision_fp op in a region of its own, called
    once: what every pass must run."""
    return next(
        p
        for p in drawn
        if p.context.second is None
        and len(p.body) == 1
        and isinstance(p.body[0], Region)
        and p.body[0].form is RegionForm.WITH
        and [(type(s), getattr(s, "policy", "")) for s in p.body[0].body] == [(OpCall, "lower_precision_fp")]
    )


def test_every_grammar_feature_is_drawn_within_the_default_budget(spec: Spec, drawn: list[Program]) -> None:
    """Every feature the grammar can draw on cpu (``grammar_features``: the installed torch's
    higher-order ops included) shows up among the first programs the fixed seed draws."""
    wanted = grammar_features(Grammar(spec, DEVICE, spec.device(DEVICE).default_dtype))
    seen = frozenset().union(*(features(p) for p in drawn))
    assert not wanted - seen, f"never drawn in {len(drawn)} programs: {sorted(wanted - seen)}"
    assert seen <= wanted, f"drawn but not in grammar_features: {sorted(seen - wanted)}"


def test_every_policy_of_the_device_and_unlisted_ops_are_drawn(spec: Spec, drawn: list[Program]) -> None:
    policies = {s.policy for p in drawn for s in walk(p.body) if isinstance(s, OpCall)}
    device = spec.device(DEVICE)
    listed = {entry.policy.value for entry in device.ops.values()}
    assert listed | {"unlisted"} <= policies


def test_programs_shrink_to_one_op_called_in_a_region(spec: Spec, shrunk: Program) -> None:
    """What Hypothesis shrinks toward: a function calling one op on graph inputs, called once
    under no_grad inside the spec's first region entry point (the documented use)."""
    assert shrunk.form is Form.FUNCTION
    assert shrunk.context.grad_mode is GradMode.NO_GRAD
    assert shrunk.context.second is None
    assert shrunk.context.around is not None
    assert shrunk.context.around.entry == spec.surface.entry_points[0].name
    (op,) = shrunk.body
    assert isinstance(op, OpCall)
    assert all(leaf.holder is Holder.INPUT for leaf in shrunk.leaves)


def test_drawing_and_rendering_are_deterministic(spec: Spec, drawn: list[Program]) -> None:
    """The same seed draws the same programs; a program renders to the same text each time."""
    for p in drawn[:: len(drawn) // 10]:
        assert script_for(p, "inductor", spec) == script_for(p, "inductor", spec)
    assert draw(spec, 20) == draw(spec, 20)


def test_the_drawn_programs_run_eagerly(spec: Spec, drawn: list[Program]) -> None:
    """Nearly every drawn program runs under eager autocast, and eager twice gives the same. The
    category draws again where eager itself cannot run a program (seen: torch.cond's check of a
    branch's output strides under the symbolic shapes it traces with, outside any region)."""
    records = [run(p, "eager", spec) for p in drawn[:20]]
    ran = [r for r in records if r.status == OK]
    assert len(ran) >= 18, [f"{r.status}: {r.eager and r.eager.error}" for r in records if r.status != OK]
    for record in ran:
        assert record.eager is not None and record.got is not None
        assert record.eager.first is not None and record.got.first is not None
        assert record.eager.first.dtypes == record.got.first.dtypes
        assert record.eager.first.state == record.got.first.state


FAST_PASSES = (
    "eager",
    "aot_eager",
    "export-strict",
    "export-nonstrict",
    "export-strict-decomposed",
    "export-nonstrict-decomposed",
)
SLOW_PASSES = ("inductor", "inductor-emulate_precision_casts", "inductor-freezing", "aoti")


def check_pass(spec: Spec, program: Program, pass_name: str) -> None:
    record = run(program, pass_name, spec)
    assert record.status == OK, f"{record.status}: {record.got and record.got.error}\n{record.script}"
    assert record.eager is not None and record.got is not None
    assert record.eager.first is not None and record.got.first is not None
    assert record.got.first.dtypes == record.eager.first.dtypes
    assert record.got.first.state == record.eager.first.state
    assert {o.op for o in record.outputs} == {s.op for s in walk(program.body) if isinstance(s, OpCall)}


@pytest.mark.parametrize("pass_name", FAST_PASSES)
def test_each_pass_runs_the_simplest_program(spec: Spec, simplest: Program, pass_name: str) -> None:
    check_pass(spec, simplest, pass_name)


@pytest.mark.slow
@pytest.mark.parametrize("pass_name", SLOW_PASSES)
def test_each_compiling_pass_runs_the_simplest_program(spec: Spec, simplest: Program, pass_name: str) -> None:
    """inductor and AOTInductor build C++ (tens of seconds each): slow. Freezing needs an
    inference program: the simplest one, under no_grad."""
    if pass_name == "inductor-freezing":
        training = dataclasses.replace(simplest, context=Context(GradMode.GRAD, training=True))
        assert PASSES[pass_name].inapplicable(training) is not None  # says why, runs nothing
        assert run(training, pass_name, spec).status == NOT_APPLICABLE
        simplest = dataclasses.replace(simplest, context=Context(GradMode.NO_GRAD, training=False))
    check_pass(spec, simplest, pass_name)


def printed(seen: CallResult) -> str:
    return ", ".join(seen.dtypes) if seen.error is None else seen.error


def test_the_standalone_script_runs_and_prints_what_it_says(
    spec: Spec, drawn: list[Program], tmp_path: Path
) -> None:
    """``python script.py`` prints, per side and call, what the runner records from the same
    text: a program called a second time under another autocast state whose output dtypes
    change with it."""

    def changes(r: Record) -> bool:
        return bool(r.status == OK and r.eager and r.eager.first and r.eager.second) and (
            r.eager.second.dtypes != r.eager.first.dtypes  # type: ignore[union-attr]
        )

    program = next(
        p
        for p in sorted(drawn, key=size)
        if p.context.second is not None and p.context.second.kind is SecondKind.STATE
        if changes(run(p, "eager", spec))
    )
    record = run(program, "aot_eager", spec)
    path = tmp_path / "program.py"
    path.write_text(record.script)
    out = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    assert record.eager is not None and record.got is not None
    for label, side in (("eager", record.eager), ("aot_eager", record.got)):
        assert side.first is not None and side.second is not None
        assert f"{label}: first call: {printed(side.first)} | state after:" in out, out
        assert f"{label}: second call (state): {printed(side.second)} | state after:" in out, out
    assert "pass: aot_eager" in out


def test_program_ops_are_read_from_the_program(spec: Spec, simplest: Program) -> None:
    (region,) = simplest.body
    assert isinstance(region, Region)
    (op,) = region.body
    assert isinstance(op, OpCall)
    assert program_ops(simplest, spec) == (op.op,)


def test_program_ops_read_past_an_item_graph_break(spec: Spec, drawn: list[Program]) -> None:
    """A tracer cannot read a value: the trace leaves the ``.item()`` out, not the ops."""
    program = min((p for p in drawn if "break:item" in features(p)), key=size)
    called = {s.op for s in walk(program.body) if isinstance(s, OpCall)}
    assert called and set(program_ops(program, spec)) & called


def test_reduce_keeps_what_the_program_shows(drawn: list[Program]) -> None:
    """Reducing with a property the program keeps (it calls a given op) leaves a smaller
    program that still has it."""
    big = max(drawn, key=size)
    wanted = next(s.op for s in walk(big.body) if isinstance(s, OpCall))
    small = reduce(big, lambda p: any(isinstance(s, OpCall) and s.op == wanted for s in walk(p.body)))
    assert size(small) < size(big)
    assert [s.op for s in walk(small.body) if isinstance(s, OpCall)] == [wanted]


def test_without_autocast_disables_every_region_and_keeps_the_rest(drawn: list[Program]) -> None:
    """What a pass's failure is compared with: the same program, every region disabled with
    the cache as by default, and no cache switch (autocast's too)."""
    with_regions = [p for p in drawn if any(isinstance(s, Region) for s in walk(p.body))]
    assert any(isinstance(s, CacheSwitch) for p in with_regions[:50] for s in walk(p.body))
    for p in with_regions[:50]:
        bare = without_autocast(p)
        regions = [s for s in walk(bare.body) if isinstance(s, Region)]
        assert regions and not any(r.autocast.enabled for r in regions), p.id
        assert all(r.autocast.cache_enabled is None for r in regions), p.id
        kept = [type(s) for s in walk(p.body) if not isinstance(s, CacheSwitch)]
        assert [type(s) for s in walk(bare.body)] == kept
        assert bare.leaves == p.leaves and bare.context.grad_mode == p.context.grad_mode
        around = [a for a in (bare.context.around, bare.context.second and bare.context.second.around) if a]
        assert not any(a.enabled for a in around)


def named(node: object) -> list[object]:
    """Every cast (a Ref) and constant (a Const) of a program's body, in order."""
    if isinstance(node, (Ref, Const)):
        return [node]
    if isinstance(node, tuple):
        return [x for n in node for x in named(n)]
    if dataclasses.is_dataclass(node) and not isinstance(node, (type, Autocast)):
        return [x for f in dataclasses.fields(node) for x in named(getattr(node, f.name))]
    return []


def test_in_float32_makes_only_the_lower_precision_dtypes_float32(drawn: list[Program]) -> None:
    """The bare program eager can run where its ops mix dtypes: its lower leaves, casts and dtype
    arguments made float32, nothing else changed (program 1636 of the 2.13 freezing campaign cast
    a float32 value to bfloat16 for a float32 conv's bias)."""
    lower = ("float16", "bfloat16")
    casting = [p for p in drawn if any(isinstance(r, Ref) and r.cast in lower for r in named(p.body))]
    assert casting, "no drawn program casts to a lower dtype"
    for p in [q for q in drawn if any(leaf.dtype in lower for leaf in q.leaves)][:50] + casting[:20]:
        wide = in_float32(p)
        assert wide.context == p.context and [type(s) for s in walk(wide.body)] == [
            type(s) for s in walk(p.body)
        ]
        for a, b in zip(p.leaves, wide.leaves, strict=True):
            assert b == (dataclasses.replace(a, dtype="float32") if a.dtype in lower else a)
        for x, y in zip(named(p.body), named(wide.body), strict=True):
            if isinstance(x, Ref) and x.cast in lower:
                assert y == dataclasses.replace(x, cast="float32"), (p.id, x, y)
            elif isinstance(x, Const) and x.dtype and x.value in lower:
                assert y == Const("float32", True), (p.id, x, y)
            else:
                assert y == x, (p.id, x, y)


@pytest.mark.parametrize("pass_name", sorted(PASSES))
def test_a_pass_takes_the_programs_drawn_for_it(spec: Spec, pass_name: str) -> None:
    """What a campaign (and a pass's cases) draws for a pass, the pass takes, but for a few that
    hold what it cannot take at all (strict export: a checkpoint; 2 to 3 of 60). Freezing takes
    inference programs only: before its draw asked for them, 28 of 60 (and 51 of the first 175
    of its campaign) were taken."""
    how = PASSES[pass_name]
    drawn = drawn_programs(spec, 60, SEED, DEVICE, inference_only=how.inference_only)
    refused = [why for p in drawn if (why := how.inapplicable(p)) is not None]
    assert len(refused) <= len(drawn) // 10, refused

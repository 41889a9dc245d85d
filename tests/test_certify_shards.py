"""Certification at scale: ``--certify-shard K/N`` and verdicts per mode.

The assignment and the cost table are tested as pure functions; the real suite's compiled
batches and modes from its collection (``--certify-list``). A synthetic suite is certified
unsharded and in two shards, as separate processes: each shard runs its part and is no
certificate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.certify_helpers import (
    REPO,
    Run,
    finish,
    pytest_cmd,
    results,
    run,
    start,
    verify,
    write,
)

from conformance.certify import bundle as B
from conformance.certify.identity import CollectedTest
from conformance.certify.shard import (
    ANY_MODE,
    CostTable,
    ShardError,
    assign,
    cost_key,
    load_costs,
    parse_shard,
)
from conformance.certify.verdict import mode_verdicts
from conformance.certify.workers import START_MARK
from conformance.modes.ops import batch_scope

# ---------------------------------------------------------------------------
# The assignment (pure)
# ---------------------------------------------------------------------------


def costs(table: dict[str, float], default: float = 0.01, **modes: float) -> CostTable:
    return CostTable(table, {ANY_MODE: default, **modes}, 0.0, "test", "0")


def mode_id(pass_: str, op: str, dtype: str, inputs: str) -> str:
    return f"conformance/test_modes.py::test_mode_matches_eager[{pass_}-{op}-{dtype}-{inputs}]"


def shards_of(owner: list[int], count: int) -> list[list[int]]:
    return [[i for i, k in enumerate(owner) if k == s] for s in range(count)]


@pytest.mark.parametrize(
    ("text", "why"),
    [("2", "give K/N"), ("a/b", "give K/N"), ("0/2", "between 1 and N"), ("3/2", "between 1 and N")],
)
def test_a_bad_shard_says_what_to_give(text: str, why: str) -> None:
    with pytest.raises(ShardError, match=why):
        parse_shard(text)
    assert (parse_shard(" 2/3 ").index, parse_shard("2/3").count) == (2, 3)


def test_shards_are_balanced_by_cost_not_by_count() -> None:
    """Costly tests among cheap ones: counting (chunks or round-robin) puts tests 0 and 2 in one
    shard and splits twelve tests six and six."""
    table = costs({"t.py::test_costly": 5.0, "t.py::test_cheap": 0.01})
    ids = [f"t.py::test_cheap[{i}]" for i in range(12)]
    ids[0], ids[2] = "t.py::test_costly[a]", "t.py::test_costly[b]"
    owner = assign([CollectedTest(i) for i in ids], 2, table, "aot_eager")
    assert owner[0] != owner[2], f"each shard gets one costly test: {owner}"
    ids[2] = "t.py::test_cheap[2]"  # one costly test: 5 s against 11 x 0.01 s
    one, two = shards_of(assign([CollectedTest(i) for i in ids], 2, table, "aot_eager"), 2)
    assert one == [0] and two == list(range(1, 12)), (one, two)


def test_a_compiled_batch_stays_in_one_shard_and_every_test_in_exactly_one() -> None:
    ops = [f"aten::op{i}" for i in range(30)]
    batched = [
        mode_id(p, op, d, inp)
        for p in ("compile", "export", "export-decomposed")
        for d in ("bfloat16", "float16")
        for op in ops
        for inp in ("float32", "lower")
    ]
    eager = [f"conformance/test_op_policy.py::test_op_policy[cpu-{op}]" for op in ops]
    tests = [CollectedTest(i, mode=i.split("[", 1)[1].split("-", 1)[0]) for i in batched]
    tests += [CollectedTest(i) for i in eager]
    for count in (1, 2, 3, 4, 7):
        owner = assign(tests, count, costs({}), "aot_eager")
        by_batch: dict[str, set[int]] = {}
        for t, k in zip(tests, owner, strict=True):
            by_batch.setdefault(batch_scope(t.id), set()).add(k)
        assert all(len(ks) == 1 for ks in by_batch.values()), f"a batch split over shards ({count})"
        assert sorted(i for s in shards_of(owner, count) for i in s) == list(range(len(tests)))
    assert len({batch_scope(t.id) for t in tests[: len(batched)]}) == 8, "export's two passes: one batch"


def test_costs_fall_back_to_the_modes_default_then_any() -> None:
    table = costs({"f.py::test_a": 2.0}, default=0.5, **{"compile@inductor": 30.0})
    assert table.micros("f.py::test_a", "eager") == 2_000_000
    assert table.micros("f.py::test_new", "compile@inductor") == 30_000_000
    assert table.micros("f.py::test_new", "eager") == 500_000
    compiled = CollectedTest(mode_id("compile", "aten::mm", "bfloat16", "lower"), mode="compile")
    assert cost_key(compiled, "inductor") == "compile-bfloat16-lower@inductor"
    script = CollectedTest(mode_id("script", "aten::mm", "bfloat16", "lower"), mode="script")
    assert cost_key(script, "inductor") == "conformance/test_modes.py::test_mode_matches_eager[script]"
    assert cost_key(CollectedTest("f.py::test_a[x-y]"), "inductor") == "f.py::test_a"


def test_the_bundled_cost_table_loads_and_a_bad_one_is_named(tmp_path: Path) -> None:
    table = load_costs()
    assert table.source == "bundled" and table.costs and table.overhead_s > 0
    assert "eager" in table.defaults and "compile@aot_eager" in table.defaults, table.defaults
    for text, why in (
        ("{", "not a cost table"),
        ('{"costs": {}, "default_s": {}, "overhead_s": 0}', "'\\*'"),
    ):
        with pytest.raises(ShardError, match=why):
            load_costs(write(tmp_path / "c.json", text))
    with pytest.raises(ShardError, match="cannot be read"):
        load_costs(tmp_path / "missing.json")


def test_a_verdict_per_mode() -> None:
    rs = [
        B.TestResult("a", "pass", category="context"),
        B.TestResult("b", "fail", mode="compile"),
        B.TestResult("c", "pass", mode="export"),
    ]
    v = mode_verdicts(rs, ["context"])
    assert list(v) == ["eager", "compile", "export"]
    assert v["eager"].conformant and v["export"].conformant and not v["compile"].conformant
    meta = {
        "options": {"compile_backend": "inductor"},
        "verdict": {"conformant": False, "reasons": ["not passing: 1 fail"]},
        "mode_verdicts": {m: {"conformant": x.conformant, "reasons": x.reasons} for m, x in v.items()},
    }
    text = B.render_summary(rs, meta)
    assert "  - compile (inductor): **NOT conformant** (not passing: 1 fail)" in text, text
    assert "  - eager: **conformant**" in text and "| export | 1 | 1 | 0 |" in text, text


def test_the_real_suites_compile_cases_carry_their_mode_and_batches_stay_whole(tmp_path: Path) -> None:
    """Collected as verify-bundle collects: ModeCase, RegionCase and GradCase tests are
    compile-mode; the assignment keeps each compiled batch in one shard."""
    listing = tmp_path / "tests.json"
    args = ("--backend", "cpu", "--dtype", "bfloat16", "--mode", "compile", "--certify-list", str(listing))
    p = run(pytest_cmd(*args, "--pyargs", "conformance"), REPO, timeout=600)
    assert listing.is_file(), p.repro()
    tests = [CollectedTest(t["id"], mode=t["mode"]) for t in json.loads(listing.read_text())]
    modes: dict[str, set[str]] = {}
    for t in tests:
        modes.setdefault(t.id.split("[", 1)[0].rsplit("::", 1)[1], set()).add(t.mode)
    for fn in ("test_mode_matches_eager", "test_region_matches_eager", "test_mode_gradients_match_eager"):
        assert modes[fn] == {"compile"}, (fn, modes[fn])
    assert modes["test_op_policy"] == {"eager"}, modes["test_op_policy"]
    owner = assign(tests, 4, load_costs(), "aot_eager")
    where: dict[str, set[int]] = {}
    for t, k in zip(tests, owner, strict=True):
        where.setdefault(batch_scope(t.id), set()).add(k)
    batches = {s: ks for s, ks in where.items() if s.startswith("compile-")}
    assert len(batches) == 2 and all(len(ks) == 1 for ks in batches.values()), batches


# ---------------------------------------------------------------------------
# A synthetic suite, certified whole and in shards, merged
# ---------------------------------------------------------------------------

SUITE = """
import pytest

@pytest.mark.context
@pytest.mark.parametrize("i", range(5))
def test_context(i): pass

@pytest.mark.op_policy
@pytest.mark.parametrize("op", ["a", "b", "c"])
def test_policy(op):
    if op == "b":
        raise RuntimeError("kernel b missing")

@pytest.mark.numerics
def test_skipped(): pytest.skip("not applicable here")

@pytest.mark.numerics
def test_fails(): assert False, "off by one"
"""
EXPECTATIONS = """kind: expectations
expectations:
  - {match: "test_syn.py::test_policy[b]", status: xfail, reason: r,
     error: {type: RuntimeError, message: "kernel b missing"}}
"""
RUNS = {  # name -> extra options
    "full": (),
    "s1": ("--certify-shard", "1/2"),
    "s2": ("--certify-shard", "2/2"),
    "s2-other": ("--certify-shard", "2/2", "--test-timeout", "77"),
}


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Run]]:
    d = tmp_path_factory.mktemp("shards")
    write(d / "test_syn.py", SUITE)
    write(d / "exp.yaml", EXPECTATIONS)
    base = ("--backend", "cpu", "--expectations", "exp.yaml")
    procs = {n: start(pytest_cmd(*base, "--certify", n, *extra, "."), d) for n, extra in RUNS.items()}
    runs = {n: finish(p, d) for n, p in procs.items()}
    for n, r in runs.items():
        assert (d / n / B.MANIFEST).is_file(), r.repro()
    return d, runs


def test_each_shard_runs_its_part_and_is_no_certificate(sharded: tuple[Path, dict[str, Run]]) -> None:
    d, runs = sharded
    one, two, full = (set(results(d / n)) for n in ("s1", "s2", "full"))
    assert one and two and not one & two and one | two == full, runs["s1"].repro()
    for n in ("s1", "s2"):
        shard = json.loads((d / n / B.SHARD).read_text())
        assert set(shard["tests"]) == set(results(d / n)) and shard["tests_in_run"] == len(full)
        assert len(json.loads((d / n / B.COLLECTED).read_text())) == len(full), "each shard records the run"
        logs = "".join(p.read_text() for p in (d / n / B.LOGS).glob("*.log"))
        started = {ln.removeprefix(START_MARK) for ln in logs.splitlines() if ln.startswith(START_MARK)}
        assert started == set(shard["tests"]), "the workers ran the shard's tests, no other"
    v = verify(d / "s1", d)
    assert v.rc == 1 and "this is shard 1 of 2 of a run (--certify-shard), not a certificate" in v.out, (
        v.repro()
    )


def test_bad_shard_options_stop_the_run_with_exit_2(sharded: tuple[Path, dict[str, Run]]) -> None:
    d = sharded[0]
    cases = {
        ("--certify", "bad1", "--certify-shard", "3/2"): "--certify-shard 3/2: K must be between 1 and N",
        ("--certify-shard", "1/2"): "--certify-shard splits a certification: add --certify DIR",
        (
            "--certify",
            "bad2",
            "--certify-shard",
            "1/2",
            "--certify-costs",
            "nope.json",
        ): "nope.json: cannot be read",
        ("--certify-costs", "exp.yaml"): "--certify-costs balances --certify-shard",
    }
    procs = {args: start(pytest_cmd("--backend", "cpu", *args, "."), d) for args in cases}
    for args, proc in procs.items():
        r = finish(proc, d)
        assert r.rc == 2 and cases[args] in r.out, r.repro()

"""Certification at scale: ``--certify-shard K/N``, ``autocast-spec merge-bundles``, verdicts per mode.

The assignment and the cost table are tested as pure functions; the real suite's compiled
batches and modes from its collection (``--certify-list``). A synthetic suite is certified
unsharded and in two shards (and one shard again with another option), as separate
processes; the merged bundle must verify as the unsharded one does, and merge-bundles must
refuse (exit 2) a missing shard, an overlapping one, one run with other options and one of
another torch build. The real suite's sharded runs are measured in
``benchmarks/bench_certify_shards.py``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.certify_helpers import (
    REPO,
    Run,
    certification,
    results,
    write,
)
from helpers.once import once_per_run
from helpers.warm_runs import pytest_run, verify_run

from conformance.categories.modes import batch_scope
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
from conformance.cli import main as cli_main

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
    owner = assign([CollectedTest(i) for i in ids], 2, table)
    assert owner[0] != owner[2], f"each shard gets one costly test: {owner}"
    ids[2] = "t.py::test_cheap[2]"  # one costly test: 5 s against 11 x 0.01 s
    one, two = shards_of(assign([CollectedTest(i) for i in ids], 2, table), 2)
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
        owner = assign(tests, count, costs({}))
        by_batch: dict[str, set[int]] = {}
        for t, k in zip(tests, owner, strict=True):
            by_batch.setdefault(batch_scope(t.id), set()).add(k)
        assert all(len(ks) == 1 for ks in by_batch.values()), f"a batch split over shards ({count})"
        assert sorted(i for s in shards_of(owner, count) for i in s) == list(range(len(tests)))
    assert len({batch_scope(t.id) for t in tests[: len(batched)]}) == 8, "export's two passes: one batch"


def test_costs_fall_back_to_the_modes_default_then_any() -> None:
    table = costs({"f.py::test_a": 2.0}, default=0.5, **{"compile-inductor": 30.0})
    assert table.micros("f.py::test_a", "eager") == 2_000_000
    assert table.micros("f.py::test_new", "compile-inductor") == 30_000_000
    assert table.micros("f.py::test_new", "eager") == 500_000
    compiled = CollectedTest(
        mode_id("compile-inductor", "aten::mm", "bfloat16", "lower"), mode="compile-inductor"
    )
    assert cost_key(compiled) == "compile-inductor-bfloat16-lower"
    script = CollectedTest(mode_id("script", "aten::mm", "bfloat16", "lower"), mode="script")
    assert cost_key(script) == "conformance/test_modes.py::test_mode_matches_eager[script]"
    assert cost_key(CollectedTest("f.py::test_a[x-y]")) == "f.py::test_a"


def test_the_bundled_cost_table_loads_and_a_bad_one_is_named(tmp_path: Path) -> None:
    table = load_costs()
    assert table.source == "bundled" and table.costs and table.overhead_s > 0
    assert "eager" in table.defaults and "compile" in table.defaults, table.defaults
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
        B.TestResult("b", "fail", mode="compile-inductor"),
        B.TestResult("c", "pass", mode="export"),
    ]
    v = mode_verdicts(rs, ["context"])
    assert list(v) == ["eager", "compile-inductor", "export"]
    assert v["eager"].conformant and v["export"].conformant and not v["compile-inductor"].conformant
    meta = {
        "options": {"compile_backend": ["inductor"]},
        "verdict": {"conformant": False, "reasons": ["not passing: 1 fail"]},
        "mode_verdicts": {m: {"conformant": x.conformant, "reasons": x.reasons} for m, x in v.items()},
    }
    text = B.render_summary(rs, meta)
    assert "  - compile-inductor: **NOT conformant** (not passing: 1 fail)" in text, text
    assert "  - eager: **conformant**" in text and "| export | 1 | 1 | 0 |" in text, text


def test_the_real_suites_compile_cases_carry_their_mode_and_batches_stay_whole(tmp_path: Path) -> None:
    """Collected as verify-bundle collects: the execution modes' cases are
    compile-mode; the assignment keeps each compiled batch in one shard."""
    listing = tmp_path / "tests.json"
    args = ("--backend", "cpu", "--dtype", "bfloat16", "--mode", "compile", "--certify-list", str(listing))
    p = pytest_run([*args, "--pyargs", "conformance"], {})  # in the repository root, as before
    assert listing.is_file(), p.repro()
    tests = [CollectedTest(t["id"], mode=t["mode"]) for t in json.loads(listing.read_text())]
    modes: dict[str, set[str]] = {}
    for t in tests:
        modes.setdefault(t.id.split("[", 1)[0].rsplit("::", 1)[1], set()).add(t.mode)
    for fn in ("test_mode_matches_eager", "test_region_matches_eager", "test_mode_gradients_match_eager"):
        assert modes[fn] == {"compile"}, (fn, modes[fn])
    assert modes["test_op_policy"] == {"eager"}, modes["test_op_policy"]
    owner = assign(tests, 4, load_costs())
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


def certify_in_shards(d: Path) -> dict[str, Run]:
    """Each run forked from a warm process (its workers are fresh interpreters, as always)."""
    write(d / "test_syn.py", SUITE)
    write(d / "exp.yaml", EXPECTATIONS)
    base = ("--backend", "cpu", "--expectations", str(d / "exp.yaml"))
    runs = {n: pytest_run([*base, "--certify", str(d / n), *extra, str(d)], {}) for n, extra in RUNS.items()}
    for n, r in runs.items():
        assert (d / n / B.MANIFEST).is_file(), r.repro()
    return runs


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Run]]:
    """Certified once per test run, whichever xdist worker asks first (helpers/once.py); each
    test writes under its own names in the shared directory."""
    return once_per_run(tmp_path_factory, "shards", certify_in_shards)


def merge_bundles(d: Path, *args: str) -> Run:
    """``autocast-spec merge-bundles ARGS`` in ``d``, in this process (the command's own main)."""
    out, err = io.StringIO(), io.StringIO()
    cwd = Path.cwd()
    try:
        os.chdir(d)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli_main(["merge-bundles", *args])
    finally:
        os.chdir(cwd)
    return Run(["autocast-spec", "merge-bundles", *args], d, rc, out.getvalue() + err.getvalue())


def doctored(d: Path, name: str, edit: Any, manifest: bool = True) -> str:
    """A copy of a shard with environment.json edited (and its manifest rewritten)."""
    copy = d / f"{name}-doctored-{len(list(d.glob(name + '-doctored-*')))}"
    shutil.copytree(d / name, copy)
    env = json.loads((copy / B.ENVIRONMENT).read_text())
    edit(env)
    (copy / B.ENVIRONMENT).write_text(json.dumps(env))
    if manifest:
        B.write_manifest(copy)
    return copy.name


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
    v = verify_run(d / "s1", {})
    assert v.rc == 1 and "this is shard 1 of 2 of a run (--certify-shard), not a certificate" in v.out, (
        v.repro()
    )


@pytest.mark.slow
def test_merged_shards_verify_equal_to_the_unsharded_run(sharded: tuple[Path, dict[str, Run]]) -> None:
    d = sharded[0]
    m = merge_bundles(d, "merged", "s2", "s1")
    assert m.rc == 0 and "merged 2 shards into merged: 10 tests" in m.out, m.repro()
    merged, full = verify_run(d / "merged", {}), verify_run(d / "full", {})
    assert merged.rc == full.rc == 1, (merged.repro(), full.repro())
    strip = lambda out: [ln.replace("merged", "X").replace("full", "X") for ln in out.splitlines()]  # noqa: E731
    assert strip(merged.out) == strip(full.out), (merged.out, full.out)
    assert "mode eager: NOT conformant: not passing: 1 fail" in merged.out, merged.out
    assert {i: r["status"] for i, r in results(d / "merged").items()} == {
        i: r["status"] for i, r in results(d / "full").items()
    }
    assert list(results(d / "merged")) == list(results(d / "full")), "collection order"
    a, b = certification(d / "merged"), certification(d / "full")
    for key in ("counts", "verdict", "mode_verdicts", "tests", "options", "spec_hash"):
        assert a[key] == b[key], key
    assert [s["index"] for s in a["merged_from"]] == [1, 2] and "shard" not in a


def test_merge_refuses_a_missing_shard(sharded: tuple[Path, dict[str, Run]]) -> None:
    d = sharded[0]
    m = merge_bundles(d, "out-missing", "s1")
    assert m.rc == 2 and "shard(s) 2/2 missing: give every shard" in m.out, m.repro()
    assert "test(s) of the full run are in no shard given" in m.out and not (d / "out-missing").exists()


def test_merge_refuses_an_overlapping_shard(sharded: tuple[Path, dict[str, Run]]) -> None:
    d = sharded[0]
    shutil.copytree(d / "s1", d / "s1-again")
    m = merge_bundles(d, "out-overlap", "s1", "s2", "s1-again")
    assert m.rc == 2 and "are both shard 1/2: give each shard once" in m.out, m.repro()
    assert "overlap: both hold test_syn.py::test_" in m.out, m.repro()


def test_merge_refuses_a_shard_run_with_other_options(sharded: tuple[Path, dict[str, Run]]) -> None:
    d = sharded[0]
    m = merge_bundles(d, "out-options", "s1", "s2-other")
    assert m.rc == 2 and "differ in options.test_timeout_s: 300.0 vs 77.0" in m.out, m.repro()


def test_merge_refuses_another_torch_build_but_not_another_host(sharded: tuple[Path, dict[str, Run]]) -> None:
    d = sharded[0]

    def other_build(env: dict[str, Any]) -> None:
        env["torch"]["git_version"] = "0123456789abcdef"

    def other_host(env: dict[str, Any]) -> None:
        env["host_cpu"] = {"model": "another CPU", "isa_flags": ["avx2"], "torch_cpu_capability": "AVX2"}
        config = env["torch"]["build_config"].splitlines()
        env["torch"]["build_config"] = "\n".join(
            "  - CPU capability usage: AVX2" if "CPU capability usage" in ln else ln for ln in config
        )

    m = merge_bundles(d, "out-build", "s1", doctored(d, "s2", other_build))
    assert m.rc == 2 and "differ in torch build.git_version:" in m.out, m.repro()
    m = merge_bundles(d, "out-tampered", "s1", doctored(d, "s2", other_build, manifest=False))
    assert m.rc == 2 and "changed after certification" in m.out, m.repro()
    m = merge_bundles(d, "out-host", "s1", doctored(d, "s2", other_host))
    assert m.rc == 0, m.repro()
    env = json.loads((d / "out-host" / B.ENVIRONMENT).read_text())
    assert [s["host_cpu"]["model"] for s in env["shards"]][1] == "another CPU", "each shard's host is kept"


def test_merge_never_overwrites_out_unasked(sharded: tuple[Path, dict[str, Run]]) -> None:
    d = sharded[0]
    out = d / "out-taken"
    out.mkdir()
    write(out / "mine.txt", "a user's file")
    m = merge_bundles(d, "out-taken", "s1", "s2")
    assert m.rc == 2 and "the directory is not empty" in m.out and "--overwrite" in m.out, m.repro()
    assert (out / "mine.txt").read_text() == "a user's file"
    m = merge_bundles(d, "s1", "s1", "s2", "--overwrite")
    assert m.rc == 2 and "OUT must lie outside every shard" in m.out, m.repro()
    m = merge_bundles(d, "out-taken", "s1", "s2", "--overwrite")
    assert m.rc == 0 and not (out / "mine.txt").exists(), m.repro()


def test_bad_shard_options_stop_the_run_with_exit_2(sharded: tuple[Path, dict[str, Run]]) -> None:
    """Each stops before a test runs: forked from a warm process, with absolute paths."""
    d = sharded[0]
    bad1, bad2, nope, exp = (str(d / n) for n in ("bad1", "bad2", "nope.json", "exp.yaml"))
    cases = {
        ("--certify", bad1, "--certify-shard", "3/2"): "--certify-shard 3/2: K must be between 1 and N",
        ("--certify-shard", "1/2"): "--certify-shard splits a certification: add --certify DIR",
        ("--certify", bad2, "--certify-shard", "1/2", "--certify-costs", nope): "nope.json: cannot be read",
        ("--certify-costs", exp): "--certify-costs balances --certify-shard",
    }
    for args, message in cases.items():
        r = pytest_run(["--backend", "cpu", *args, str(d)], {})
        assert r.rc == 2 and message in r.out, r.repro()


def test_the_ci_example_certifies_every_shard_and_merges_what_it_uploaded() -> None:
    """examples/ci/certify.yml: SHARDS matches the matrix, each job certifies its own shard
    with the compile cache it restores (and saves) and uploads it under a name the merge job's
    download pattern matches, per torch release."""
    wf = yaml.safe_load((REPO / "examples" / "ci" / "certify.yml").read_text())
    certify, merge = wf["jobs"]["certify"], wf["jobs"]["merge"]
    matrix = certify["strategy"]["matrix"]
    assert matrix["shard"] == list(range(1, int(wf["env"]["SHARDS"]) + 1)), matrix
    assert merge["strategy"]["matrix"]["torch"] == matrix["torch"] and merge["needs"] == "certify"
    run = next(s["run"] for s in certify["steps"] if "--certify-shard" in s.get("run", ""))
    assert '--certify-shard "${{ matrix.shard }}/$SHARDS"' in run, run
    cache = next(s for s in certify["steps"] if s.get("uses", "").startswith("actions/cache"))
    assert (
        f"--compile-cache {cache['with']['path']} " in run and "${{ matrix.shard }}" in cache["with"]["key"]
    )
    upload = next(s for s in certify["steps"] if s.get("uses", "").startswith("actions/upload-artifact"))
    download = next(s for s in merge["steps"] if s.get("uses", "").startswith("actions/download-artifact"))
    name = upload["with"]["name"].replace("${{ matrix.torch }}", "2.13.0").replace("${{ matrix.shard }}", "3")
    pattern = download["with"]["pattern"].replace("${{ matrix.torch }}", "2.13.0")
    assert fnmatch.fnmatch(name, pattern) and not fnmatch.fnmatch(name.replace("2.13.0", "2.12.1"), pattern)
    commands = " ".join(s.get("run", "") for s in merge["steps"])
    assert (
        f'merge-bundles "certification-torch${{{{ matrix.torch }}}}" {download["with"]["path"]}/*' in commands
    )
    assert "verify-bundle" in commands

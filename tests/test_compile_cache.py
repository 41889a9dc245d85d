"""``--compile-cache DIR``: one compile cache for a run and its workers, a directory CI restores.

A directory that cannot be written stops the run with a one-line usage error naming the option
and the directory (exit 2), before anything compiles; a writable one (made if missing) receives
inductor's FX graph cache from the xdist workers (AOTAutograd's cache bypasses a graph that
enters autocast: "Unsupported call_function target _enter_autocast", torch 2.13), so a second run finds them
(docs/jit.md, "The compile cache").
"""

from __future__ import annotations

from pathlib import Path

from helpers.suite_runs import run_planted, run_suite, summary

INDUCTOR_MM = (
    "--backend",
    "cpu",
    "--dtype",
    "bfloat16",
    "--mode",
    "compile",
    "--compile-backend",
    "inductor",
)


def test_an_unwritable_compile_cache_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    p = run_suite(*INDUCTOR_MM, "--compile-cache", str(blocker / "cache"), "--co")
    err = p.stdout + p.stderr
    assert p.returncode == 2, summary(p)
    assert f"usage error: --compile-cache {blocker / 'cache'}: not a directory" in err, summary(p)
    assert "Traceback" not in err, summary(p)


def test_the_workers_fill_the_compile_cache_a_second_run_reuses(tmp_path: Path) -> None:
    cache = tmp_path / "new" / "cache"  # made with its parents
    # one graph, of bfloat16 inputs (float32 ones add a C++ cast kernel: 12 s more of CPU, the same
    # cache entry and reuse to check); -n 1: an xdist worker compiles it
    run = (*INDUCTOR_MM, "--op", "aten::mm", "-k", "compile-inductor-aten and lower", "-n", "1")
    p = run_suite(*run, "--compile-cache", str(cache))
    assert p.returncode == 0 and " passed" in p.stdout, summary(p)
    entries = {d.name: sum(1 for f in d.rglob("*") if f.is_file()) for d in cache.iterdir() if d.is_dir()}
    assert entries.get("fxgraph", 0) > 0, entries  # AOTAutograd's cache refuses autocast's graphs
    before = sorted(str(f.relative_to(cache)) for f in (cache / "fxgraph").rglob("*") if f.is_file())
    p = run_suite(*run, "--compile-cache", str(cache))
    assert p.returncode == 0 and " passed" in p.stdout, summary(p)
    after = sorted(str(f.relative_to(cache)) for f in (cache / "fxgraph").rglob("*") if f.is_file())
    assert after == before  # every graph came from the cache: no entry was added


COUNT_BUILDS = """
import functools
from pathlib import Path

import torch._inductor as inductor

LOG = Path(__file__).with_suffix(".builds")
REAL = inductor.aoti_compile_and_package


@functools.wraps(REAL)
def counted(*args, **kwargs):  # each AOTInductor build, one line
    with LOG.open("a") as log:
        log.write("build\\n")
    return REAL(*args, **kwargs)


inductor.aoti_compile_and_package = counted
"""


def test_a_warm_run_loads_the_aoti_packages_the_cold_run_built(tmp_path: Path) -> None:
    """AOTInductor builds are not in inductor's FX graph cache: the suite keeps each package
    under the name of what it is built from, and a second run with the same cache loads them."""
    cache, log = tmp_path / "cache", tmp_path / "count_builds.builds"
    run: tuple[str, ...] = ("--backend", "cpu", "--dtype", "bfloat16", "--mode", "aoti", "--op", "aten::mm")
    run += ("-m", "mode_check and not programs")  # a generated program's script builds its own
    # two packages, of two programs (the op's on float32 inputs; a region that raises at run time):
    # a package loaded under another's name runs where the region must raise, and the run fails.
    # Each build is a C++ compile (about 10 s of CPU); the op's bfloat16 inputs would be a third.
    run += ("-k", "float32 or runtime")
    cold, cold_outcomes = run_planted(
        tmp_path, "count_builds", COUNT_BUILDS, *run, "--compile-cache", str(cache)
    )
    assert cold.returncode == 0 and " passed" in cold.stdout, summary(cold)
    packages = sorted(f.name for f in (cache / "aoti_packages").iterdir())  # named by their inputs
    assert log.read_text().count("build") == len(packages) == 2, (log.read_text(), packages)
    log.unlink()
    warm, warm_outcomes = run_planted(
        tmp_path, "count_builds", COUNT_BUILDS, *run, "--compile-cache", str(cache)
    )
    assert warm_outcomes == cold_outcomes, summary(warm)
    assert not log.exists(), log.read_text()  # every package loaded, none built
    assert sorted(f.name for f in (cache / "aoti_packages").iterdir()) == packages

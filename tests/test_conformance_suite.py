"""The conformance suite itself, run in subprocesses as a user would run it.

- xpu/mps/mtia ``--policy-only`` pass here (no GPU); cpu and cuda: test_self_conformance.py;
- ``-n 2`` (pytest-xdist) gives the same per-test outcomes;
- bad options stop before collection with one line, no traceback;
- ``--op`` keeps exactly one op's tests;
- the suite is not vacuous: a wrong AutocastCPU kernel planted with torch.library
  (a plugin loaded with ``-p``) makes the op's tests fail;
- a planted autocast exit that leaks the cache flag fails the leak check with the command
  that reruns the test, and is an xfail once a known bug declares it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.suite_runs import ROOT, outcomes, run_planted, run_suite, summary

from conformance.kit.case import sentinel_op
from conformance.target import Options, resolve_target


# cpu --dtype all and cuda --policy-only --dtype all: tests/test_self_conformance.py.
@pytest.mark.parametrize("device", ["xpu", "mps", "mtia"])
def test_policy_only_passes_without_the_device(device: str) -> None:
    p = run_suite("--backend", device, "--policy-only", "--dtype", "all")
    assert p.returncode == 0, summary(p)
    assert " passed" in p.stdout and "skipped" in p.stdout, summary(p)  # numerics are reported as skipped


@pytest.mark.parametrize("mode", ["script", "trace", "compile"])
def test_every_mode_passes_with_every_dtype(mode: str) -> None:
    """Each mode agrees with eager, or diverges as spec/jit.yaml declares, for both dtypes (the
    generated programs: tests/test_programs.py)."""
    p = run_suite("--backend", "cpu", "--dtype", "all", "-m", "mode_check and not programs", "--mode", mode)
    assert p.returncode == 0, summary(p)
    assert " passed" in p.stdout, summary(p)
    if mode != "trace":  # declared divergences are xfails (trace has none on cpu)
        assert " xfailed" in p.stdout, summary(p)


def test_xdist_gives_the_same_outcomes(tmp_path: Path) -> None:
    sel = ["--backend", "cpu", "-m", "registration or eligibility or promote or context"]
    a = run_suite(*sel, f"--junitxml={tmp_path / 'serial.xml'}")
    b = run_suite(*sel, "-n", "2", f"--junitxml={tmp_path / 'xdist.xml'}")
    serial, parallel = outcomes(tmp_path / "serial.xml"), outcomes(tmp_path / "xdist.xml")
    assert serial and serial == parallel, (summary(a), summary(b))


SEEN_PLUGIN = """
import os, pathlib, torch

def pytest_runtest_call(item):
    out = pathlib.Path(os.environ["SEEN_DIR"]) / os.environ["PYTEST_XDIST_WORKER"]
    out.write_text(str(torch.get_num_threads()))
"""


@pytest.mark.parametrize("run", ["suite", "suite, OMP_NUM_THREADS=2", "another project's tests"])
def test_xdist_workers_share_the_cores_unless_omp_num_threads_says(run: str, tmp_path: Path) -> None:
    """Each of ``-n 2``'s workers running the suite gets torch threads for half the cores (at
    least one); a user's ``OMP_NUM_THREADS`` decides where given; another project's tests, with
    the plugin installed, keep torch's default (one thread per core)."""
    (tmp_path / "threads_seen.py").write_text(SEEN_PLUGIN)
    (tmp_path / "test_other.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    cores = len(os.sched_getaffinity(0))
    given = "2" if "OMP_NUM_THREADS" in run else None
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}  # tests/conftest.py sets it
    env |= {"SEEN_DIR": str(tmp_path), "PYTHONPATH": str(tmp_path)} | (
        {"OMP_NUM_THREADS": given} if given else {}
    )
    where = ["conformance", "--backend", "cpu", "--op", "aten::mm", "-m", "eligibility"]
    selection = [str(tmp_path / "test_other.py")] if run.startswith("another") else where
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "threads_seen", "-n", "2",
         *selection],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    seen = {f.name: f.read_text() for f in tmp_path.glob("gw*")}
    expected = given or str(cores if run.startswith("another") else max(1, cores // 2))
    assert seen and set(seen.values()) == {expected}, seen


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--backend", "nosuchdevice"], "--backend nosuchdevice"),
        (["--backend", "cpu", "--dtype", "float64"], "--dtype float64"),
        (["--backend", "cuda"], "--policy-only"),
        (["--backend", "cpu", "--spec", "/no/such/spec"], "--spec /no/such/spec"),
        (["--backend", "cpu", "--implementation", "mine"], "--implementation mine"),
        (["--backend", "cpu", "--op", "aten::no_such_op"], "--op aten::no_such_op"),
    ],
)
def test_bad_options_are_one_line_usage_errors(args: list[str], needle: str) -> None:
    p = run_suite(*args, "--co")
    err = p.stderr.strip()
    assert p.returncode == 2, (p.returncode, err)
    assert needle in err and "Traceback" not in err, err
    assert len([ln for ln in err.splitlines() if "usage error:" in ln]) == 1, err


def _ids(p: subprocess.CompletedProcess[str]) -> set[str]:
    """Collected test ids, less the ``[NOTSET]`` placeholders of a test left with no case (skipped)."""
    return {ln for ln in p.stdout.splitlines() if "::" in ln and not ln.endswith("[NOTSET]")}


def test_op_option_keeps_exactly_that_ops_tests() -> None:
    """``--op aten::mm`` collects every test of aten::mm a full run has, and no other op's."""
    full = _ids(run_suite("--backend", "cpu", "--co"))
    mine = _ids(run_suite("--backend", "cpu", "--op", "aten::mm", "--co"))
    names_mm = re.compile(r"aten::mm[\]-]")
    assert mine and mine <= full
    assert {i for i in full if names_mm.search(i)} <= mine
    assert not {i for i in mine if "aten::" in i and not names_mm.search(i)}


PLANTED = '''
"""Plant a wrong AutocastCPU kernel for {op}: it ignores the policy and runs in the input dtype."""
import torch

_OP = torch.ops.{ns}.{name}.{overload}
_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
_LIB = torch.library.Library("{ns}", "IMPL")


def _no_cast(*args, **kwargs):
    with torch._C._ExcludeDispatchKeyGuard(_KEYS):
        return _OP(*args, **kwargs)


_LIB.impl("{qualified}", _no_cast, "AutocastCPU")
'''


def test_suite_is_not_vacuous(tmp_path: Path) -> None:
    target = resolve_target(Options("cpu", None, (), None, False))
    op = sentinel_op(target)
    assert op is not None
    ns, rest = op.split("::")
    name, _, overload = rest.partition(".")
    (tmp_path / "wrong_autocast_kernel.py").write_text(
        textwrap.dedent(
            PLANTED.format(op=op, ns=ns, name=name, overload=overload or "default", qualified=rest)
        )
    )
    sel = ["--backend", "cpu", "-k", f"{op}] or {op}-", "-m", "op_policy or numerics or autograd"]
    clean = run_suite(*sel, f"--junitxml={tmp_path / 'clean.xml'}")
    broken = run_suite(
        *sel,
        "-p",
        "wrong_autocast_kernel",
        f"--junitxml={tmp_path / 'broken.xml'}",
        env_extra={"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    before, after = outcomes(tmp_path / "clean.xml"), outcomes(tmp_path / "broken.xml")
    assert "passed" in before.values(), summary(clean)
    assert all(v in ("passed", "skipped") for v in before.values()), summary(clean)
    failed = sorted(k for k, v in after.items() if v == "failure")
    assert any("test_op_policy" in k for k in failed), summary(broken)
    assert any("test_numerics" in k for k in failed), summary(broken)


LEAKY_EXIT = '''
"""A backend whose autocast exit forgets to restore the cache flag it found: the region's outlives it."""
import torch

_EXIT = torch.autocast.__exit__


def _exit(self, *exc):
    out = _EXIT(self, *exc)
    torch.set_autocast_cache_enabled(self._cache_enabled)  # planted: not the flag it found
    return out


torch.autocast.__exit__ = _exit
'''

LEAK_DECLARED = """  - id: planted-exit-keeps-cache-flag
    check: context.leaked_state
    observed: "is_autocast_cache_enabled() True -> False"
    torch: ">=2.0"
    reason: the planted exit leaves the region's cache flag set
    source: https://example.com/planted
"""


def test_a_test_that_leaks_autocast_state_fails_with_a_reproduction_or_is_declared(tmp_path: Path) -> None:
    """The leak check (``context.leaked_state``) goes through ``expect``: a failure naming the
    difference with the command that reruns the test; an xfail once a known bug declares it."""
    sel = ("--backend", "cpu", "--dtype", "bfloat16", "-m", "cache", "-k", "cache_disabled and aten::mm-")
    p, got = run_planted(tmp_path, "leaky_exit", LEAKY_EXIT, *sel)
    assert got and set(got.values()) == {"failure"}, summary(p)
    test_id = "conformance/test_cache.py::test_cache[cpu-bfloat16-lower_precision_fp-aten::mm-cache_disabled]"
    for line in (
        "the test left the autocast state different from how it found it: aten::mm via aten::mm on cpu "
        "under autocast(bfloat16) [cache_disabled]",
        "  observed: is_autocast_cache_enabled() True -> False",
        "  reproduce:",
        f"    python -m pytest '{test_id}' --backend cpu --dtype bfloat16 -p leaky_exit",
    ):
        assert line in p.stdout.splitlines(), summary(p)
    spec = tmp_path / "spec"
    shutil.copytree(ROOT / "spec", spec)
    rules = spec / "rules.yaml"
    text = rules.read_text()
    assert "\nknown_bugs:\n" in text
    rules.write_text(text.replace("\nknown_bugs:\n", "\nknown_bugs:\n" + LEAK_DECLARED, 1))
    p, got = run_planted(tmp_path, "leaky_exit", LEAKY_EXIT, *sel, "--spec", str(spec), "-rx")
    assert p.returncode == 0 and " xfailed" in p.stdout, summary(p)
    assert "known bug planted-exit-keeps-cache-flag (https://example.com/planted)" in p.stdout, summary(p)


def test_a_policy_only_run_never_asks_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """--policy-only works on FakeTensors alone: resolving the target creates nothing on the
    device, not even the empty tensor that tells a real device from an absent one."""
    import conformance.target as target_module

    def asked(device: str) -> bool:
        if device != "cpu":  # the reference device may be asked
            raise AssertionError(f"a policy-only run asked whether {device} is real")
        return True

    monkeypatch.setattr(target_module, "device_is_real", asked)
    t = resolve_target(Options("cuda", None, (), None, True))
    assert t.policy_only and t.reference_device == "cpu"
    with pytest.raises(AssertionError, match="asked whether cuda is real"):
        resolve_target(Options("cuda", None, (), None, False))

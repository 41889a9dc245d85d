"""What the runner excuses as not autocast's (reference_impl.programs.runner.run): a pass's error,
its missing gradients, its values, each only where the program with every region disabled shows
the same. The scripts are stand-ins saying what the two runs found: nothing is compiled."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from autocast_spec.model import Spec
from conformance.categories.programs import value_gaps
from conformance.target import Options, resolve_target
from reference_impl.programs import (
    EAGER_ERROR,
    NOT_APPLICABLE,
    OK,
    PASS_ERROR,
    AutocastState,
    CallResult,
    Program,
    Record,
    Side,
    run,
    runner,
)
from reference_impl.programs.reduce import without_autocast

STATE = {"enabled": {}, "dtype": {}, "cache_enabled": True, "nesting": 0}


def raising(error: str, eager_backward: str | None = None) -> str:
    """A script whose ``observe()`` says what a run found: eager's first call ran (no outputs;
    its backward raised ``eager_backward`` where given), the pass's first call raised ``error``."""
    state = {"enabled": {}, "dtype": {}, "cache_enabled": True, "nesting": 0}
    ran: dict[str, object] = {"pass_error": None, "first": None, "gradients": None, "second": None}
    grads = {"error": eager_backward} if eager_backward else None
    eager = {**ran, "first": {"outputs": [], "error": None, "state": state}, "gradients": grads}
    raised = {**ran, "first": {"outputs": [], "error": error, "state": state}}
    return f"def observe():\n    return {{'eager': {eager!r}, 'pass': {raised!r}}}\n"


FOUND = "RuntimeError: expected scalar type Float but found {}"
NOT_FOR = "RuntimeError: \"addmm_impl_cpu_\" not implemented for '{}'"
NODE = "RuntimeError: bad node add_{} of '{}' at {}"


@pytest.mark.parametrize(
    ("error", "twin", "status"),
    [
        ("InternalTorchDynamoError: KeyError: 140", "InternalTorchDynamoError: KeyError: 97", NOT_APPLICABLE),
        (NODE.format(3, "L_self_3", "0x7f3a10c8"), NODE.format(1, "L_self_1", "0x7f0b"), NOT_APPLICABLE),
        (FOUND.format("BFloat16"), "RuntimeError: mat1 and mat2 shapes cannot be multiplied", PASS_ERROR),
        (FOUND.format("BFloat16"), FOUND.format("Half"), PASS_ERROR),
        (NOT_FOR.format("BFloat16"), NOT_FOR.format("Float"), PASS_ERROR),
        ("TypeError: got torch.float16 for v2", "TypeError: got torch.float32 for v2", PASS_ERROR),
    ],
    ids=["numbers", "names-and-addresses", "other-message", "other-dtype", "quoted-dtype", "dtype-digits"],
)
def test_a_pass_error_is_not_autocasts_only_where_it_is_the_same_without_autocast(
    spec: Spec, shrunk: Program, monkeypatch: pytest.MonkeyPatch, error: str, twin: str, status: str
) -> None:
    """A pass that raises where eager ran is excused (not applicable) only where it raises the
    same error on the program with every region disabled (``twin``): the same type and message,
    its numbers, addresses and quoted names aside; an error of the same type that says something
    else, or names another dtype, fails (the dtype is what autocast changes). The scripts are
    stand-ins saying what the two runs found: nothing is compiled."""
    bare = without_autocast(shrunk)
    assert bare != shrunk
    scripts = {shrunk: raising(error), bare: raising(twin)}
    monkeypatch.setattr(runner, "script_for", lambda program, pass_name, spec: scripts[program])
    record = run(shrunk, "aot_eager", spec)
    assert record.status == status, record.not_applicable


@pytest.mark.parametrize(
    ("twin", "excused"),
    [("AssertionError: Unexpected fake buffer _tensor_constant0", True), (FOUND.format("BFloat16"), False)],
    ids=["same-without-autocast", "not-without-autocast"],
)
def test_a_pass_error_is_excused_the_same_way_where_eagers_backward_raised(
    spec: Spec, shrunk: Program, monkeypatch: pytest.MonkeyPatch, twin: str, excused: bool
) -> None:
    """Eager's call ran, its backward raised; the pass's call raised: the program with every region
    disabled decides whose error it is. Before, eager's backward error skipped that run (inductor's
    `Unexpected fake buffer`, no autocast needed: the 2.13.0 inductor campaign's program 1593)."""
    eig = "RuntimeError: linalg_eig_backward: The eigenvectors in the complex case are specified up to"
    error = "AssertionError: Unexpected fake buffer _tensor_constant0"
    bare = without_autocast(shrunk)
    scripts = {shrunk: raising(error, eig), bare: raising(twin, eig)}
    monkeypatch.setattr(runner, "script_for", lambda program, pass_name, spec: scripts[program])
    record = run(shrunk, "inductor", spec)
    assert record.status == (NOT_APPLICABLE if excused else PASS_ERROR), record.not_applicable


def with_gradients(eager: dict[str, str | None], got: dict[str, str | None] | None) -> str:
    """A stand-in script: both first calls ran (no outputs); eager's backward gave ``eager``,
    the pass's ``got`` (None: its outputs required no grad)."""
    state = {"enabled": {}, "dtype": {}, "cache_enabled": True, "nesting": 0}
    ran: dict[str, object] = {"pass_error": None, "second": None, "gradients_error": None}
    first = {"outputs": [], "error": None, "state": state}
    sides = {
        "eager": {**ran, "first": first, "gradients": eager},
        "pass": {**ran, "first": first, "gradients": got},
    }
    return f"def observe():\n    return {sides!r}\n"


@pytest.mark.parametrize(
    ("twin_pass", "excused"),
    [(None, True), ({"w0": "float32"}, False)],
    ids=["none-without-autocast-too", "given-without-autocast"],
)
def test_gradients_a_pass_does_not_give_are_autocasts_only_where_it_gives_them_without_autocast(
    spec: Spec,
    shrunk: Program,
    monkeypatch: pytest.MonkeyPatch,
    twin_pass: dict[str, str] | None,
    excused: bool,
) -> None:
    """Strict export's module of a custom autograd Function gives no gradients, with autocast or
    without: not autocast's. Where the pass gives them without autocast, their loss is judged."""
    bare = without_autocast(shrunk)
    scripts = {
        shrunk: with_gradients({"w0": "float32"}, None),
        bare: with_gradients({"w0": "float32"}, twin_pass),
    }
    monkeypatch.setattr(runner, "script_for", lambda program, pass_name, spec: scripts[program])
    record = run(shrunk, "export-strict", spec)
    assert (record.status == NOT_APPLICABLE) is excused, record.not_applicable


@pytest.mark.parametrize(
    "pass_raised, excused",
    [
        ("BackendCompilerFailed: backend='aot_eager' raised: AssertionError: outs_to_grad length (1) != "
         "tangents length (2)", True),
        ("AssertionError: outs_to_grad length (3) != tangents length (4)", True),
        ("BackendCompilerFailed: backend='aot_eager' raised: RuntimeError: expected scalar type Float but "
         "found BFloat16", False),
    ],
)  # fmt: skip
def test_a_pass_that_raises_what_eagers_backward_raised_has_nothing_to_compare(
    shrunk: Program, pass_raised: str, excused: bool
) -> None:
    """A compiled program traces its backward with its forward: where eager's call ran and its
    backward raised, the pass raising the same (before its call returns) is eager's error; another
    error is the pass's, and judged."""
    state = AutocastState({"cpu": False}, {"cpu": "bfloat16"}, True, 0)
    call = CallResult((), None, state)
    eager = Side(None, call, None, "AssertionError: outs_to_grad length (1) != tangents length (2)", None)
    got = Side(None, CallResult((), pass_raised, state), None, None, None)
    record = Record(shrunk, "aot_eager", eager, got, (), None, None, True, "", 0.0)
    assert (record.status == EAGER_ERROR) is excused, record.status


def valued(eager: float, got: float, dtype: str) -> str:
    """A stand-in script: both first calls ran and returned one tensor of ``dtype``, eager's
    holding ``eager`` and the pass's ``got``."""

    def side(value: float) -> str:
        tensor = f"torch.full((4,), {value}, dtype=torch.{dtype})"
        first = f"{{'outputs': [{tensor}], 'error': None, 'state': {STATE!r}}}"
        return f"{{'pass_error': None, 'gradients': None, 'second': None, 'first': {first}}}"

    return f"import torch\n\ndef observe():\n    return {{'eager': {side(eager)}, 'pass': {side(got)}}}\n"


@pytest.mark.parametrize(
    ("twin", "excused"),
    [
        ((1.0, 2.0, "bfloat16"), True),
        ((1.0, 1.6, "bfloat16"), True),
        ((1.0, 1.0, "bfloat16"), False),
        ((1.0, 1.25, "bfloat16"), False),
        ((1.0, 2.0, "float32"), False),
    ],
    ids=["same-without-autocast", "half-as-much", "none-without-autocast", "less-than-half", "other-dtype"],
)
def test_values_are_autocasts_unless_they_differ_as_much_without_autocast(
    spec: Spec,
    shrunk: Program,
    monkeypatch: pytest.MonkeyPatch,
    twin: tuple[float, float, str],
    excused: bool,
) -> None:
    """The pass's output differs from eager's by 1.0 (bfloat16), beyond the suite's tolerance. It
    is the pass's numerics, not autocast's (not applicable), only where without autocast the same
    output, of the same dtype, differs by at least half as much (inductor's grid_sampler on
    bfloat16 in a disabled region: 0.018 with and without; the 2.13.0 inductor campaign's
    program 888). Else the difference stays, and the suite's check fails it."""
    bare = without_autocast(shrunk)
    scripts = {shrunk: valued(1.0, 2.0, "bfloat16"), bare: valued(*twin)}
    monkeypatch.setattr(runner, "script_for", lambda program, pass_name, spec: scripts[program])
    options = Options("cpu", "bfloat16", (), None, False, modes=("compile",), compile_backends=("inductor",))
    gaps = functools.partial(value_gaps, resolve_target(options))
    record = run(shrunk, "inductor", spec, value_gaps=gaps)
    assert record.status == (NOT_APPLICABLE if excused else OK), record.not_applicable
    assert gaps(record) if not excused else True


def ran_clean() -> str:
    """A stand-in script: eager's first call and the pass's ran (no outputs)."""
    return raising("").replace("'error': ''", "'error': None")


def raising_once(error: str, mark: Path) -> str:
    """A stand-in script whose pass raises ``error`` the first time it runs (``mark`` says it
    did), and runs clean after."""
    return (
        f"import os\n\n_RAISING = {raising(error)!r}\n_CLEAN = {ran_clean()!r}\n\n"
        f"def observe():\n    first = not os.path.exists({str(mark)!r})\n"
        f"    open({str(mark)!r}, 'w').close()\n    namespace = {{}}\n"
        "    exec(_RAISING if first else _CLEAN, namespace)\n    return namespace['observe']()\n"
    )


ALIASING = (
    "UncapturedHigherOrderOpError: This higher order operator doesn't work unless it is captured "
    "completely with torch.compile. Got graph break/error: Encountered aliasing during higher order op "
    "tracing"
)


@pytest.mark.parametrize("again", ["runs", "raises"])
def test_a_pass_error_a_second_compile_does_not_raise_is_not_autocasts(
    spec: Spec, shrunk: Program, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, again: str
) -> None:
    """Without autocast the program runs; through the pass it raised. Compiled once more, where
    it runs the error was the process's first compile (2.13.0: a ``nested_compile_region`` body
    returning ``_transform_bias_rescale_qkv``'s outputs, with or without autocast: programs 54
    and 1766 of the freezing campaign), not autocast's; where it raises again, it stays."""
    bare = without_autocast(shrunk)
    mine = raising_once(ALIASING, tmp_path / "compiled") if again == "runs" else raising(ALIASING)
    scripts = {shrunk: mine, bare: ran_clean()}
    monkeypatch.setattr(runner, "script_for", lambda program, pass_name, spec: scripts[program])
    record = run(shrunk, "inductor-freezing", spec)
    assert record.status == (NOT_APPLICABLE if again == "runs" else PASS_ERROR), record.not_applicable
    if again == "runs":
        assert record.not_applicable is not None and "first compile" in record.not_applicable.reason

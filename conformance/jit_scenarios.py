"""One small reproduction per JIT/compiler limitation in ``spec/jit.yaml``.

Each scenario is a function registered under the limitation's id. It runs the
pattern on CPU autocast (bfloat16; CPU autocast needs no accelerator) and
returns an :class:`Observation`: what happened on the first call (``error`` with
the message, ``ignored``, ``works``, ``differs`` with the outputs that differ
from eager autocast, or ``crash``) and, where a scripted function behaves
otherwise when called again, what happened then. The scenarios hold no
expectations: ``conformance/test_jit_limitations.py`` compares the observation
with the spec entry.

The Python in here is the reproduction itself (TorchScript needs source code);
the labels it reports (``aten::mm``...) are matched against the spec's
``differs`` entries, so a new divergence shows up as a failure, not a pass.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from reference_impl.samples import dtype_name

DEVICE = "cpu"
LOWER = torch.bfloat16  # the CPU default; the spec's differs entries name it as dtype

Dtypes = dict[str, str]  # output label (an op name) -> dtype name, or "error"


@dataclass(frozen=True)
class Observation:
    outcome: str  # error | ignored | works | differs | crash
    message: str = ""
    differs: tuple[tuple[str, str], ...] = ()  # (op label, observed dtype) where not eager's
    later_calls: str | None = None  # outcome of a second call, when it differs from the first
    detail: str = ""  # everything seen, for failure messages

    def differs_set(self) -> frozenset[tuple[str, str]]:
        return frozenset(self.differs)


SCENARIOS: dict[str, Callable[[], Observation]] = {}


def scenario(limitation_id: str) -> Callable[[Callable[[], Observation]], Callable[[], Observation]]:
    def register(fn: Callable[[], Observation]) -> Callable[[], Observation]:
        if limitation_id in SCENARIOS:
            raise ValueError(f"two scenarios for limitation {limitation_id!r}")
        SCENARIOS[limitation_id] = fn
        return fn

    return register


# ---------------------------------------------------------------------------
# Shared helpers (pure decisions + the few side effects)
# ---------------------------------------------------------------------------


def classify(
    observed: Mapping[str, str], eager: Mapping[str, str], dropped: Mapping[str, str]
) -> Observation:
    """``works`` if as eager autocast, ``ignored`` if as without autocast, else ``differs``."""
    detail = f"observed {dict(observed)}; eager autocast {dict(eager)}; without autocast {dict(dropped)}"
    if dict(observed) == dict(eager):
        return Observation("works", detail=detail)
    if dict(observed) == dict(dropped):
        return Observation("ignored", detail=detail)
    diffs = tuple(sorted((k, v) for k, v in observed.items() if eager.get(k) != v))
    return Observation("differs", differs=diffs, detail=detail)


def dtypes(labels: tuple[str, ...], result: Any) -> Dtypes:
    outs = result if isinstance(result, (tuple, list)) else (result,)
    if len(outs) != len(labels):
        raise AssertionError(f"scenario bug: {len(outs)} outputs for labels {labels}")
    return {label: dtype_name(t.dtype) for label, t in zip(labels, outs, strict=True)}


def first_message(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def run_twice(
    call: Callable[[], Dtypes], eager: Mapping[str, str], dropped: Mapping[str, str]
) -> Observation:
    """Call twice: the first call decides ``outcome``; a differing second call sets ``later_calls``."""
    outcomes: list[Observation] = []
    for _ in range(2):
        try:
            outcomes.append(classify(call(), eager, dropped))
        except Exception as exc:  # the mode's diagnostic is what we observe
            outcomes.append(Observation("error", message=first_message(exc), detail=repr(exc)[:500]))
    first, second = outcomes
    later = None if (second.outcome, second.differs) == (first.outcome, first.differs) else second.outcome
    return Observation(
        first.outcome,
        first.message,
        first.differs,
        later,
        f"{first.detail}; second call: {second.outcome} {second.message or second.detail}",
    )


def raised(fn: Callable[[], Any]) -> Observation:
    """For patterns that fail before anything runs (scripting itself raises)."""
    try:
        fn()
    except Exception as exc:
        return Observation("error", message=first_message(exc), detail=repr(exc)[:500])
    return Observation("works", detail="no error raised")


# The eager autocast of the scenarios' Python-level regions (``ac()``): torch.autocast, or
# the implementation under test (see eager_autocast). Scripted source always names
# torch.autocast, the only autocast TorchScript knows.
_EAGER_AUTOCAST: list[Callable[..., Any]] = [torch.autocast]


@contextlib.contextmanager
def eager_autocast(impl: Callable[..., Any]) -> Iterator[None]:
    """Run the scenarios' eager regions with ``impl`` (called like ``torch.autocast``)."""
    _EAGER_AUTOCAST.append(impl)
    try:
        yield
    finally:
        _EAGER_AUTOCAST.pop()


def ac(enabled: bool = True, cache_enabled: bool | None = None) -> Any:
    return _EAGER_AUTOCAST[-1](device_type=DEVICE, dtype=LOWER, enabled=enabled, cache_enabled=cache_enabled)


@contextlib.contextmanager
def jit_autocast_pass(enabled: bool) -> Iterator[None]:
    old = torch._C._jit_set_autocast_mode(enabled)
    try:
        yield
    finally:
        torch._C._jit_set_autocast_mode(old)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def mats(n: int = 2, dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.rand(4, 4, generator=gen).to(dtype) for _ in range(n)]


F32 = "float32"
LOW = dtype_name(LOWER)


# ---------------------------------------------------------------------------
# TorchScript (seed 000: JIT scripting & autocast, known limitations)
# ---------------------------------------------------------------------------


@scenario("script-region-basic")
def _script_region_basic() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            x = torch.mm(a, b)
            return x, torch.relu(x)

    a, b = mats()
    s = torch.jit.script(fn)
    labels = ("aten::mm", "aten::relu")
    return run_twice(
        lambda: dtypes(labels, s(a, b)), dtypes(labels, fn(a, b)), {"aten::mm": F32, "aten::relu": F32}
    )


@scenario("script-decorator-on-callee")
def _script_decorator_on_callee() -> Observation:
    @torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    def helper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return helper(a, b)

    return raised(lambda: torch.jit.script(fn))


@scenario("script-decorated-scripted-function")
def _script_decorated() -> Observation:
    def make() -> Any:
        @torch.jit.script
        @torch.autocast(device_type="cpu", dtype=torch.bfloat16)
        def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.mm(a, b)

        return fn

    return raised(make)


@scenario("script-eager-decorator-outside")
def _script_eager_decorator_outside() -> Observation:
    def plain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    wrapped = torch.autocast(device_type="cpu", dtype=torch.bfloat16)(torch.jit.script(plain))
    a, b = mats()
    eager = {"aten::mm": dtype_name(torch.autocast("cpu", dtype=LOWER)(plain)(a, b).dtype)}
    return run_twice(lambda: dtypes(("aten::mm",), wrapped(a, b)), eager, {"aten::mm": F32})


@scenario("script-nonconstant-enabled")
def _script_nonconstant_enabled() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor, use_amp: bool) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=use_amp):
            return torch.mm(a, b)

    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(
        lambda: dtypes(("aten::mm",), s(a, b, True)), dtypes(("aten::mm",), fn(a, b, True)), {"aten::mm": F32}
    )


@scenario("script-with-autocast-as")
def _script_with_as() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16) as instance:
            e = torch.mm(a, b)
        with instance:
            f = torch.mm(a, b)
        return e, f

    labels = ("mm (with ... as instance)", "mm (with instance)")
    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(lambda: dtypes(labels, s(a, b)), dtypes(labels, fn(a, b)), dict.fromkeys(labels, F32))


@scenario("script-conditional-autocast")
def _script_conditional() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        on = torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=True)
        off = torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False)
        with on if bool(a[0][0] > -1.0) else off:
            return torch.mm(a, b)

    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(
        lambda: dtypes(("aten::mm",), s(a, b)), dtypes(("aten::mm",), fn(a, b)), {"aten::mm": F32}
    )


@scenario("script-nested-and-reused-regions")
def _script_nested() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
            e = torch.mm(a, b)
            with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=True):
                f = torch.mm(e, b)
                with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
                    g = torch.mm(e, b)
        return e, f, g

    labels = ("mm (off)", "mm (on)", "mm (off again)")
    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(lambda: dtypes(labels, s(a, b)), dtypes(labels, fn(a, b)), dict.fromkeys(labels, F32))


@scenario("script-promote-conservative")
def _script_promote() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.add(a, b), torch.mul(a, b), torch.addcmul(a, a, b), torch.cat([a, b])

    labels = ("aten::add.Tensor", "aten::mul.Tensor", "aten::addcmul", "aten::cat")
    a, b = mats(dtype=LOWER)
    s = torch.jit.script(fn)
    return run_twice(lambda: dtypes(labels, s(a, b)), dtypes(labels, fn(a, b)), dtypes(labels, fn(a, b)))


@scenario("script-control-flow-types")
def _script_control_flow() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            if bool(a[0][0] > -1.0):
                e = torch.mm(a, b)
                x = 1
            else:
                e = torch.mm(b, a)
                x = 2
            f = torch.mm(b, e) * x
        return e, f

    labels = ("aten::mm", "aten::mul.Scalar")
    a, b = mats()
    s = torch.jit.script(fn)
    return run_twice(lambda: dtypes(labels, s(a, b)), dtypes(labels, fn(a, b)), dict.fromkeys(labels, F32))


@scenario("script-missing-fp32-append-dtype")
def _script_missing_append_dtype() -> Observation:
    """CUDA's fp32_append_dtype ops (norm) get no cast from the JIT pass: read the optimized graph."""

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            return torch.ops.aten.norm(x, 2), torch.ops.aten.frobenius_norm(x, [0, 1])

    (x,) = mats(1)
    with quiet():
        s = torch.jit.script(fn)
        s(x)
        s(x)
    graph = torch.jit.last_executed_optimized_graph()
    cast_inputs: dict[str, bool] = {}
    for node in graph.nodes():
        if node.kind() in ("aten::norm", "aten::frobenius_norm"):
            first = next(iter(node.inputs())).node().kind()
            cast_inputs[node.kind()] = first == "aten::_autocast_to_full_precision"
    detail = f"input cast inserted by the JIT pass: {cast_inputs}"
    if cast_inputs.get("aten::frobenius_norm") is not True:
        return Observation("works", detail="the pass cast nothing at all (control op uncast); " + detail)
    outcome = "ignored" if cast_inputs.get("aten::norm") is False else "works"
    return Observation(outcome, detail=detail)


@scenario("script-pass-fp32-list")
def _script_fp32_list() -> Observation:
    def fn(a: torch.Tensor):  # type: ignore[no-untyped-def]
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return (
                torch.exp(a),
                torch.log(a),
                torch.pow(a, 2),
                torch.nn.functional.gelu(a),
                torch.softmax(a, 0),
                torch.sum(a),
                torch.nn.functional.layer_norm(a, [4]),
                torch.cumsum(a, 0),
                torch.prod(a),
                torch.log_softmax(a, 0),
                torch.rsqrt(a),
            )

    labels = (
        "aten::exp",
        "aten::log",
        "aten::pow.Tensor_Scalar",
        "aten::gelu",
        "aten::softmax.int",
        "aten::sum",
        "aten::layer_norm",
        "aten::cumsum",
        "aten::prod",
        "aten::log_softmax.int",
        "aten::rsqrt",
    )
    (a,) = mats(1, dtype=LOWER)
    s = torch.jit.script(fn)
    eager = dtypes(labels, fn(a))
    return run_twice(lambda: dtypes(labels, s(a)), eager, eager)


@scenario("script-pass-lower-precision-list")
def _script_lower_list() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor, v: torch.Tensor):  # type: ignore[no-untyped-def]
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return (
                torch.mv(a, v),
                torch.addmv(v, a, v),
                torch.addr(a, v, v),
                torch.linalg.vecdot(a, b),
                torch.chain_matmul(a, b),
                torch.mm(a, b),
            )

    labels = (
        "aten::mv",
        "aten::addmv",
        "aten::addr",
        "aten::linalg_vecdot",
        "aten::chain_matmul",
        "aten::mm",
    )
    a, b = mats()
    v = torch.rand(4, generator=torch.Generator().manual_seed(1))
    with quiet():
        s = torch.jit.script(fn)
        eager = dtypes(labels, fn(a, b, v))
        return run_twice(lambda: dtypes(labels, s(a, b, v)), eager, dict.fromkeys(labels, F32))


@scenario("script-binary-cross-entropy")
def _script_bce() -> Observation:
    def fn(p: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.nn.functional.binary_cross_entropy(p, t)

    p, t = mats()
    s = torch.jit.script(fn)
    label = ("aten::binary_cross_entropy",)
    return run_twice(lambda: dtypes(label, s(p, t)), dtypes(label, fn(p, t)), {label[0]: F32})


@scenario("script-autocast-false-under-eager-autocast")
def _script_off_under_eager() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
            return torch.mm(a, b)

    a, b = mats()
    s = torch.jit.script(fn)
    with ac():
        eager = dtypes(("aten::mm",), fn(a, b))
        return run_twice(lambda: dtypes(("aten::mm",), s(a, b)), eager, {"aten::mm": LOW})


@scenario("script-is-autocast-enabled-in-region")
def _script_is_enabled_crash() -> Observation:
    """Run in a child process: with the JIT autocast pass on, this pattern kills the interpreter."""
    code = (
        "import json, torch\n"
        "def fn(x: torch.Tensor) -> bool:\n"
        "    with torch.autocast(device_type='cpu', dtype=torch.bfloat16):\n"
        "        return torch.is_autocast_cpu_enabled()\n"
        "print(json.dumps([fn(torch.ones(2)), torch.jit.script(fn)(torch.ones(2))]))\n"
    )
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "is_autocast_enabled_in_region.py"
        script.write_text(code, encoding="utf-8")  # TorchScript reads the source from a file
        proc = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
        )
    if proc.returncode < 0:
        return Observation("crash", message=f"signal {-proc.returncode}", detail=proc.stderr[-400:])
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return Observation("error", message=lines[-1] if lines else "", detail=proc.stderr[-400:])
    eager, scripted = json.loads(proc.stdout.strip().splitlines()[-1])
    verdict = "works" if eager == scripted else "differs"
    return Observation(
        verdict,
        differs=() if verdict == "works" else (("aten::is_autocast_cpu_enabled", str(scripted)),),
        detail=proc.stdout[-200:],
    )


@scenario("script-jit-pass-disabled")
def _script_pass_disabled() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.mm(a, b)

    a, b = mats()
    with jit_autocast_pass(False):
        s = torch.jit.script(fn)
        return run_twice(
            lambda: dtypes(("aten::mm",), s(a, b)), dtypes(("aten::mm",), fn(a, b)), {"aten::mm": F32}
        )


# ---------------------------------------------------------------------------
# Mixing tracing and scripting (seed 000)
# ---------------------------------------------------------------------------


@scenario("script-calls-traced-autocast-false")
def _script_calls_traced_off() -> Observation:
    def helper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
            return torch.mm(a, b)

    a, b = mats()
    with quiet():
        traced = torch.jit.trace(helper, (a, b))

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=True):
            return traced(a, b)

    def eager_fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with ac():
            return helper(a, b)

    s = torch.jit.script(fn)
    return run_twice(
        lambda: dtypes(("aten::mm",), s(a, b)), dtypes(("aten::mm",), eager_fn(a, b)), {"aten::mm": LOW}
    )


@scenario("script-calls-traced")
def _script_calls_traced() -> Observation:
    def helper(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()
    traced = torch.jit.trace(helper, (a, b))

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return traced(a, b)

    with ac():
        eager = dtypes(("aten::mm",), helper(a, b))
    s = torch.jit.script(fn)
    return run_twice(lambda: dtypes(("aten::mm",), s(a, b)), eager, {"aten::mm": F32})


@scenario("trace-calls-scripted-under-autocast")
def _trace_calls_scripted() -> Observation:
    def inner(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    scripted = torch.jit.script(inner)

    def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return scripted(a, b)

    a, b = mats()
    eager = dtypes(("aten::mm",), outer(a, b))
    with quiet():
        traced = torch.jit.trace(outer, (a, b))
    return run_twice(lambda: dtypes(("aten::mm",), traced(a, b)), eager, {"aten::mm": F32})


@scenario("trace-calls-scripted-with-region")
def _trace_calls_scripted_region() -> Observation:
    def inner(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.mm(a, b)

    scripted = torch.jit.script(inner)

    def outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return scripted(a, b)

    a, b = mats()
    with quiet():
        traced = torch.jit.trace(outer, (a, b))
    return run_twice(
        lambda: dtypes(("aten::mm",), traced(a, b)), dtypes(("aten::mm",), inner(a, b)), {"aten::mm": F32}
    )


# ---------------------------------------------------------------------------
# Tracing (seed 003: the CPU inference path, trace + freeze)
# ---------------------------------------------------------------------------


class _ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 4, 3, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def _trace_freeze(cache_enabled: bool | None) -> Observation:
    model = _ConvNet().eval()
    x = torch.rand(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    with ac():
        eager = dtypes(("aten::conv2d",), model(x))

    def call() -> Dtypes:
        with quiet(), ac(cache_enabled=cache_enabled):
            traced = torch.jit.trace(model, x)
        frozen = torch.jit.freeze(traced)
        return dtypes(("aten::conv2d",), frozen(x))

    return run_twice(call, eager, {"aten::conv2d": F32})


@scenario("trace-freeze-cpu")
def _trace_freeze_default() -> Observation:
    return _trace_freeze(None)


@scenario("trace-freeze-cpu-cache-disabled")
def _trace_freeze_no_cache() -> Observation:
    return _trace_freeze(False)


@scenario("trace-records-autocast-casts")
def _trace_records() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            return torch.mm(a, b)

    def plain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()
    with quiet(), ac():
        traced = torch.jit.trace(plain, (a, b))  # traced under an outer autocast
    # run outside autocast: eager gives float32; the trace replays the recorded casts
    eager = dtypes(("aten::mm",), plain(a, b))
    return run_twice(lambda: dtypes(("aten::mm",), traced(a, b)), eager, {"aten::mm": "(not applicable)"})


@scenario("trace-run-under-eager-autocast")
def _trace_run_under_autocast() -> Observation:
    def plain(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()
    traced = torch.jit.trace(plain, (a, b))
    with ac():
        eager = dtypes(("aten::mm",), plain(a, b))
        return run_twice(lambda: dtypes(("aten::mm",), traced(a, b)), eager, {"aten::mm": F32})


# ---------------------------------------------------------------------------
# torch.compile (aot_eager: no C++ toolchain)
# ---------------------------------------------------------------------------


def _compiled(fn: Callable[..., Any], fullgraph: bool = False) -> Callable[..., Any]:
    return torch.compile(fn, backend="aot_eager", fullgraph=fullgraph)


@scenario("compile-with-autocast-as")
def _compile_with_as() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16) as instance:
            x = torch.mm(a, b)
        with instance:
            return torch.mm(x.float(), b)

    a, b = mats()
    c = _compiled(fn)
    return run_twice(
        lambda: dtypes(("aten::mm",), c(a, b)), dtypes(("aten::mm",), fn(a, b)), {"aten::mm": F32}
    )


@scenario("compile-nonconstant-enabled")
def _compile_nonconstant() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor, use_amp: bool) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=use_amp):
            return torch.mm(a, b)

    a, b = mats()
    c = _compiled(fn)
    labels = ("mm enabled=True", "mm enabled=False")
    return run_twice(
        lambda: dtypes(labels, (c(a, b, True), c(a, b, False))),
        dtypes(labels, (fn(a, b, True), fn(a, b, False))),
        dict.fromkeys(labels, F32),
    )


@scenario("compile-decorated-function")
def _compile_decorated() -> Observation:
    @torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, b)

    a, b = mats()
    c = _compiled(fn, fullgraph=True)
    return run_twice(
        lambda: dtypes(("aten::mm",), c(a, b)), dtypes(("aten::mm",), fn(a, b)), {"aten::mm": F32}
    )


@scenario("compile-autocast-false-under-eager-autocast")
def _compile_off_under_eager() -> Observation:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16, enabled=False):
            return torch.mm(a, b)

    a, b = mats()
    c = _compiled(fn)
    with ac():
        eager = dtypes(("aten::mm",), fn(a, b))
        return run_twice(lambda: dtypes(("aten::mm",), c(a, b)), eager, {"aten::mm": LOW})


@scenario("compile-exception-restores-state")
def _compile_exception() -> Observation:
    class Boom(Exception):
        pass

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        with torch.autocast(device_type="cpu", dtype=torch.float16):
            x = torch.mm(a, b)
            if x.sum() > -1e30:
                raise Boom("escape the region")
            return x

    a, b = mats()
    c = _compiled(fn)

    def state() -> Dtypes:
        return {
            "is_autocast_enabled": str(torch.is_autocast_enabled(DEVICE)),
            "get_autocast_dtype": dtype_name(torch.get_autocast_dtype(DEVICE)),
        }

    before = state()

    def call() -> Dtypes:
        with contextlib.suppress(Boom):
            c(a, b)
        return state()

    return run_twice(call, before, {"is_autocast_enabled": "True", "get_autocast_dtype": "float16"})


def scenario_ids() -> tuple[str, ...]:
    return tuple(SCENARIOS)


def run(limitation_id: str) -> Observation:
    """Run one scenario, leaving autocast state and the JIT pass setting as found."""
    fn = SCENARIOS[limitation_id]
    pass_before = torch._C._jit_set_autocast_mode(True)
    torch._C._jit_set_autocast_mode(pass_before)
    before = (torch.is_autocast_enabled(DEVICE), torch.get_autocast_dtype(DEVICE))
    try:
        with quiet():
            return fn()
    finally:
        torch._C._jit_set_autocast_mode(pass_before)
        torch.set_autocast_enabled(DEVICE, before[0])
        torch.set_autocast_dtype(DEVICE, before[1])

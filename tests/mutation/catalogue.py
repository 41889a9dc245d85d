"""The mutants: each one deliberate deviation from the spec, injected into a real backend.

A mutant names the suite selection that must catch it (options, test files and a
``-k`` expression) and an ``install`` function that the mutant plugin calls in the
suite's subprocess before any test runs. Kernel mutants register wrong Autocast
kernels (on ``AutocastCPU``, or on ``AutocastCUDA`` for the policy-only cuda
backend); semantic mutants monkeypatch ``torch.autocast``, ``torch.amp.custom_fwd``
/ ``custom_bwd``, the cast cache or the JIT.

Op names appear here because this is a test of the tests; :func:`check_catalogue`
verifies against the spec that each named op still has the policy the mutant
assumes, so a spec change gives a clear error instead of a vacuous mutant.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from helpers.suite_runs import suite_selection

from autocast_spec.model import Policy

from . import kernels as K

CPU = ("--backend", "cpu")
CUDA_FAKE = ("--backend", "cuda", "--policy-only")
OP_FILES = (
    "test_op_policy.py",
    "test_numerics.py",
    "test_eligibility.py",
    "test_registration.py",
    "test_unlisted.py",
    "test_promote.py",
    "test_banned.py",
    "test_opt_dtype.py",
    "test_autograd.py",
)


@dataclass(frozen=True)
class Mutant:
    id: str
    category: str  # the suite category the deviation belongs to
    what: str  # what the mutated backend does wrong, in one line
    options: tuple[str, ...]  # suite options (backend, dtype, mode)
    files: tuple[str, ...]  # conformance test files to run
    keyword: str | None  # the -k expression, or None for all of the files
    install: Callable[[], None]
    assumes: tuple[tuple[str, str, str | None], ...] = ()  # (device, op, policy or None=unlisted)

    @property
    def selection(self) -> tuple[str, ...]:
        """The suite arguments, the same with and without the mutant."""
        return suite_selection(self.options, self.files, self.keyword)


def op_keyword(op: str) -> str:
    """Every generated test of ``op`` (ids carry ``...-aten::op-...`` or end in ``aten::op]``)."""
    return f"{op}] or {op}-"


def _options(device: str) -> tuple[str, ...]:
    return CPU if device == "cpu" else CUDA_FAKE


def kernel_mutant(
    id: str,
    category: str,
    what: str,
    device: str,
    op: str,
    install: Callable[[], None],
    policy: str | None,
    files: tuple[str, ...] = OP_FILES,
    options: tuple[str, ...] | None = None,
) -> Mutant:
    return Mutant(
        id,
        category,
        what,
        options or _options(device),
        files,
        op_keyword(op),
        install,
        ((device, op, policy),),
    )


# ---------------------------------------------------------------------------
# Policies: every listed op of a policy moved to each other policy
# ---------------------------------------------------------------------------

# (device, op, its policy): one op per policy, on the device that has the policy.
MOVE_SOURCES = (
    ("cpu", "aten::mm", Policy.LOWER_PRECISION_FP),
    ("cpu", "aten::cdist", Policy.FP32),
    ("cpu", "aten::index_copy", Policy.PROMOTE),
    ("cuda", "aten::softmax.int", Policy.FP32_SET_OPT_DTYPE),
    ("cuda", "aten::norm.Scalar", Policy.FP32_APPEND_DTYPE),
    ("cuda", "aten::binary_cross_entropy", Policy.BANNED),
)

# fp32_append_dtype needs an overload that takes the appended dtype; only the norm
# ops have one, and they are fp32_append_dtype already. Moving another op there is
# not a backend anyone can build, so the matrix leaves that column out.
UNREACHABLE_TARGETS = (Policy.FP32_APPEND_DTYPE,)

# Moves no observation of the op's results can tell apart from the spec, so no test can
# kill them: (op, moved to) -> why. They are listed, not counted.
EQUIVALENT = {
    ("aten::softmax.int", Policy.FP32): (
        "softmax(x.float()) and softmax(x, dtype=float32) give the same values, dtypes and gradients "
        "(the kernel converts its input to dtype first); an explicit dtype= is honoured by both"
    ),
}


def _moves() -> list[Mutant]:
    out = []
    for device, op, src in MOVE_SOURCES:
        for dst in Policy:
            if dst is src or dst in UNREACHABLE_TARGETS or (op, dst) in EQUIVALENT:
                continue
            out.append(
                kernel_mutant(
                    f"move-{device}-{op.removeprefix('aten::')}-to-{dst.value}",
                    "policy",
                    f"{op} ({src.value} on {device}) runs as {dst.value}",
                    device,
                    op,
                    functools.partial(K.move, device, op, dst),
                    src.value,
                )
            )
    return out


POLICY_MUTANTS = [
    *_moves(),
    kernel_mutant(
        "drop-cpu-conv2d",
        "registration",
        "aten::conv2d has no CPU autocast (its kernel only redispatches)",
        "cpu",
        "aten::conv2d",
        functools.partial(K.drop, "cpu", "aten::conv2d"),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "drop-cuda-exp",
        "registration",
        "aten::exp has no CUDA autocast (runs in its input dtype)",
        "cuda",
        "aten::exp",
        functools.partial(K.drop, "cuda", "aten::exp"),
        "fp32",
    ),
    kernel_mutant(
        "add-cpu-relu",
        "registration",
        "aten::relu (not listed on cpu) gets a lower_precision_fp kernel",
        "cpu",
        "aten::relu",
        functools.partial(K.move, "cpu", "aten::relu", Policy.LOWER_PRECISION_FP),
        None,
    ),
    kernel_mutant(
        "add-cuda-linalg_inv",
        "registration",
        "aten::linalg_inv (not listed on cuda) gets an fp32 kernel",
        "cuda",
        "aten::linalg_inv",
        functools.partial(K.move, "cuda", "aten::linalg_inv", Policy.FP32),
        None,
    ),
]


# ---------------------------------------------------------------------------
# Eligibility, numerics, promote, banned, dtype arguments, autograd
# ---------------------------------------------------------------------------


def _other_lower(t: torch.Tensor, lower: torch.dtype) -> torch.dtype | None:
    if not K.floating_on("cpu", t):
        return None
    return torch.float16 if lower == torch.bfloat16 else torch.bfloat16


def _to_lower(t: torch.Tensor, lower: torch.dtype) -> torch.dtype | None:
    return lower if K.floating_on("cpu", t) else None


def _relaxed(op: str, **rules: Any) -> Callable[[], None]:
    def install() -> None:
        K.spec_kernels(K.with_rules(K.bundled(), **rules), "cpu", [op])

    return install


def _device_blind_mode() -> None:
    """An autocast built above the dispatcher (a torch function mode), blind to devices:
    under CPU autocast it casts aten::mm's floating inputs on any device."""
    from torch.overrides import TorchFunctionMode

    targets = (torch.mm, torch.Tensor.mm, torch.ops.aten.mm.default)

    class DeviceBlindAutocast(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in targets and torch.is_autocast_enabled("cpu"):
                lower = torch.get_autocast_dtype("cpu")
                args = K.map_tensors(args, lambda t: t.to(lower) if t.is_floating_point() else t)
            return func(*args, **kwargs)

    DeviceBlindAutocast().__enter__()  # for the rest of the process (the main thread)


def _not_out_of_place(mutable_op: str, policy: Policy) -> Callable[[], None]:
    def install() -> None:
        spec = K.with_policy(K.with_rules(K.bundled(), out_of_place_only=False), "cpu", mutable_op, policy)
        K.spec_kernels(spec, "cpu", [mutable_op])

    return install


def _stack_to_first_dtype() -> None:
    op = torch.ops.aten.stack.default

    def kernel(tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
        first = tensors[0].dtype
        with K.below_autocast("cpu"):
            return op([t.to(first) if K.floating_on("cpu", t) else t for t in tensors], dim)

    K.register("aten::stack", kernel, "cpu")


def _banned_wrong_message() -> None:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("binary_cross_entropy is not supported here")

    K.register("aten::binary_cross_entropy", kernel, "cuda")


def _explicit_dtype_ignored() -> None:
    op = torch.ops.aten.softmax.int

    def kernel(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        with K.below_autocast("cuda"):
            return op(x, dim, dtype=torch.float32)

    K.register("aten::softmax.int", kernel, "cuda")


def _append_lower_dtype() -> None:
    info = K.bundled().op_info("aten::norm.Scalar")
    assert info is not None and info.append_dtype_target is not None
    target = K.op_overload(info.append_dtype_target)

    def kernel(x: torch.Tensor, p: Any = 2) -> torch.Tensor:
        with K.below_autocast("cuda"):
            return target(x, p, dtype=torch.get_autocast_dtype("cuda"))

    K.register("aten::norm.Scalar", kernel, "cuda")


def _detaching_casts() -> None:
    K.cast_kernel("aten::mm", "cpu", _to_lower, before=lambda t: t.detach())


OP_MUTANTS = [
    kernel_mutant(
        "wrong-lower-dtype",
        "op_policy",
        "aten::mm casts to the other lower dtype (float16 under bfloat16 autocast)",
        "cpu",
        "aten::mm",
        functools.partial(K.cast_kernel, "aten::mm", "cpu", _other_lower),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "float64-cast",
        "eligibility",
        "aten::mm casts float64 inputs too",
        "cpu",
        "aten::mm",
        _relaxed("aten::mm", never_cast=()),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "integer-cast",
        "eligibility",
        "aten::mm casts integer and bool inputs too",
        "cpu",
        "aten::mm",
        _relaxed("aten::mm", floating_only=False),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "other-device-cast",
        "eligibility",
        "autocast implemented as a torch function mode casts aten::mm's inputs on any device",
        "cpu",
        "aten::mm",
        _device_blind_mode,
        "lower_precision_fp",
    ),
    kernel_mutant(
        "inplace-autocast",
        "eligibility",
        "the in-place aten::addmm_ is autocast (lower_precision_fp)",
        "cpu",
        "aten::addmm",
        _not_out_of_place("aten::addmm_", Policy.LOWER_PRECISION_FP),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "out-autocast",
        "eligibility",
        "aten::mm.out (out=) is autocast (lower_precision_fp)",
        "cpu",
        "aten::mm",
        _not_out_of_place("aten::mm.out", Policy.LOWER_PRECISION_FP),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "set-opt-dtype-when-ineligible",
        "eligibility",
        "aten::softmax.int passes dtype=float32 even for float64 or integer inputs",
        "cuda",
        "aten::softmax.int",
        _explicit_dtype_ignored,
        "fp32_set_opt_dtype",
        files=("test_eligibility.py",),
    ),
    kernel_mutant(
        "wrong-numbers",
        "numerics",
        "aten::mm returns bfloat16 values scaled by 1 + 2**-7 (right dtype, wrong numbers)",
        "cpu",
        "aten::mm",
        functools.partial(K.cast_kernel, "aten::mm", "cpu", _to_lower, lambda out: out * (1 + 2**-7)),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "computed-in-float32",
        "numerics",
        "aten::mm computes in float32 and rounds the result (right dtype, other numbers)",
        "cpu",
        "aten::mm",
        functools.partial(
            K.cast_kernel, "aten::mm", "cpu", lambda t, lower: None, lambda out: out.to(torch.bfloat16)
        ),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "promote-to-first-input",
        "promote",
        "aten::stack casts every input to the first input's dtype instead of the widest",
        "cpu",
        "aten::stack",
        _stack_to_first_dtype,
        "promote",
    ),
    kernel_mutant(
        "banned-wrong-message",
        "banned",
        "aten::binary_cross_entropy raises, but not with the spec's message",
        "cuda",
        "aten::binary_cross_entropy",
        _banned_wrong_message,
        "banned",
    ),
    kernel_mutant(
        "explicit-dtype-ignored",
        "opt_dtype",
        "aten::softmax.int overrides an explicit dtype= with float32",
        "cuda",
        "aten::softmax.int",
        _explicit_dtype_ignored,
        "fp32_set_opt_dtype",
    ),
    kernel_mutant(
        "append-lower-dtype",
        "op_policy",
        "aten::norm.Scalar appends the autocast dtype instead of float32",
        "cuda",
        "aten::norm.Scalar",
        _append_lower_dtype,
        "fp32_append_dtype",
    ),
    kernel_mutant(
        "casts-detach-graph",
        "autograd",
        "aten::mm's casts detach its inputs from autograd (no gradients reach float32 leaves)",
        "cpu",
        "aten::mm",
        _detaching_casts,
        "lower_precision_fp",
    ),
]


# ---------------------------------------------------------------------------
# Context semantics and the weight-cast cache (torch.autocast monkeypatched)
# ---------------------------------------------------------------------------

AUTOCAST = torch.amp.autocast_mode.autocast


def _patch(owner: Any, name: str, make: Callable[[Any], Any]) -> Callable[[], None]:
    """An install function replacing ``owner.name`` with ``make(original)``."""

    def install() -> None:
        setattr(owner, name, make(getattr(owner, name)))

    return install


def _exit_keeps_state_on_exception(orig: Any) -> Any:
    def __exit__(self: Any, exc_type: Any, exc: Any, tb: Any) -> Any:
        if exc_type is not None:
            torch.autocast_decrement_nesting()
            return False
        return orig(self, exc_type, exc, tb)

    return __exit__


def _inner_exit_enables(orig: Any) -> Any:
    def __exit__(self: Any, exc_type: Any, exc: Any, tb: Any) -> Any:
        result = orig(self, exc_type, exc, tb)
        depth = torch.autocast_increment_nesting() - 1
        torch.autocast_decrement_nesting()
        if depth > 0:
            torch.set_autocast_enabled(self.device, True)
        return result

    return __exit__


def _init_with(**forced: Any) -> Callable[[Any], Any]:
    def make(orig: Any) -> Any:
        def __init__(self: Any, device_type: str, dtype: Any = None, enabled: bool = True, **kw: Any) -> None:
            args = {"dtype": dtype, "enabled": enabled, **kw, **forced}
            orig(self, device_type, **args)

        return __init__

    return make


def _init_silent(orig: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            orig(self, *args, **kwargs)

    return __init__


def _threads_inherit_state() -> None:
    start, run = threading.Thread.start, threading.Thread.run

    def patched_start(self: threading.Thread) -> None:
        self._autocast_state = (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))  # type: ignore[attr-defined]
        start(self)

    def patched_run(self: threading.Thread) -> None:
        state = getattr(self, "_autocast_state", None)
        if state is not None:
            torch.set_autocast_enabled("cpu", state[0])
            torch.set_autocast_dtype("cpu", state[1])
        run(self)

    threading.Thread.start = patched_start  # type: ignore[method-assign]
    threading.Thread.run = patched_run  # type: ignore[method-assign]


def _threads_inherit_cache_flag() -> None:
    start, run = threading.Thread.start, threading.Thread.run

    def patched_start(self: threading.Thread) -> None:
        depth = torch.autocast_increment_nesting() - 1
        torch.autocast_decrement_nesting()
        self._autocast_cache = (torch.is_autocast_cache_enabled(), depth)  # type: ignore[attr-defined]
        start(self)

    def patched_run(self: threading.Thread) -> None:
        state = getattr(self, "_autocast_cache", None)
        if state is not None:
            torch.set_autocast_cache_enabled(state[0])
            for _ in range(state[1]):
                torch.autocast_increment_nesting()
        run(self)

    threading.Thread.start = patched_start  # type: ignore[method-assign]
    threading.Thread.run = patched_run  # type: ignore[method-assign]


def _never_clear_cache() -> None:
    torch.clear_autocast_cache = lambda: None


def cpu_sentinel_op() -> str:
    """The op the suite's context, cache and transition checks watch on cpu (the sentinel)."""
    from conformance.kit.case import sentinel_op
    from conformance.target import Options, resolve_target

    op = sentinel_op(resolve_target(Options("cpu", None, (), None, False)))
    assert op is not None
    return op


def _caching(keep: Callable[[torch.Tensor], bool]) -> Callable[[], None]:
    def install() -> None:
        K.caching_kernel(cpu_sentinel_op(), "cpu", keep)

    return install


def _float32(t: torch.Tensor) -> bool:
    return t.dtype == torch.float32


def context_mutant(
    id: str,
    category: str,
    what: str,
    files: tuple[str, ...],
    install: Callable[[], None],
    keyword: str | None = None,
    options: tuple[str, ...] = CPU,
) -> Mutant:
    return Mutant(id, category, what, options, files, keyword, install)


CONTEXT_MUTANTS = [
    context_mutant(
        "exception-keeps-state",
        "context",
        "an exception escaping torch.autocast leaves autocast enabled with the region's dtype",
        ("test_context.py",),
        _patch(AUTOCAST, "__exit__", _exit_keeps_state_on_exception),
    ),
    context_mutant(
        "inner-exit-enables",
        "context",
        "leaving a nested region re-enables autocast instead of restoring the outer state",
        ("test_context.py",),
        _patch(AUTOCAST, "__exit__", _inner_exit_enables),
    ),
    context_mutant(
        "decorator-ignored",
        "context",
        "@torch.autocast(...) returns the function undecorated",
        ("test_context.py",),
        _patch(AUTOCAST, "__call__", lambda orig: lambda self, func: func),
    ),
    context_mutant(
        "thread-inherits-state",
        "threads",
        "a new thread starts with its parent's autocast state",
        ("test_threads.py",),
        _threads_inherit_state,
    ),
    context_mutant(
        "thread-inherits-cache-flag",
        "threads",
        "a new thread starts with its parent's cache flag and nesting depth (enabled and dtype are fresh)",
        ("test_threads.py",),
        _threads_inherit_cache_flag,
    ),
    context_mutant(
        "dtype-argument-ignored",
        "context",
        "torch.autocast(dtype=...) is ignored: the device's default dtype is used",
        ("test_context.py", "test_hypothesis.py"),
        _patch(AUTOCAST, "__init__", _init_with(dtype=None)),
        options=(*CPU, "--dtype", "float16"),
    ),
    context_mutant(
        "unsupported-dtype-silent",
        "context",
        "an unsupported autocast dtype disables autocast without the warning",
        ("test_context.py",),
        _patch(AUTOCAST, "__init__", _init_silent),
    ),
    context_mutant(
        "cache-never-cleared",
        "cache",
        "the weight-cast cache is never cleared (torch.clear_autocast_cache does nothing)",
        ("test_cache.py",),
        _never_clear_cache,
    ),
    context_mutant(
        "cache-enabled-forced",
        "cache",
        "cache_enabled=False is ignored",
        ("test_cache.py",),
        _patch(AUTOCAST, "__init__", _init_with(cache_enabled=True)),
    ),
    context_mutant(
        "cache-keeps-non-leaf",
        "cache",
        "the cache keeps float32 tensors that require grad even when they are not leaves",
        ("test_cache.py",),
        _caching(lambda t: _float32(t) and t.requires_grad),
    ),
    context_mutant(
        "cache-keeps-non-grad",
        "cache",
        "the cache keeps float32 tensors that do not require grad",
        ("test_cache.py",),
        _caching(lambda t: _float32(t) and t.is_leaf),
    ),
    Mutant(
        "cache-bug-in-one-kernel",
        "cache",
        "aten::bmm's Autocast kernel (not the sentinel op's) caches non-leaf float32 tensors needing grad",
        CPU,
        ("test_cache.py",),
        op_keyword("aten::bmm"),
        lambda: K.caching_kernel("aten::bmm", "cpu", lambda t: _float32(t) and t.requires_grad),
        (("cpu", "aten::bmm", "lower_precision_fp"),),
    ),
    context_mutant(
        "cache-keeps-nothing",
        "cache",
        "weights are cast again at every call (nothing is cached)",
        ("test_cache.py",),
        _caching(lambda t: False),
    ),
]


# ---------------------------------------------------------------------------
# Custom autograd functions, JIT / compile, the reference itself
# ---------------------------------------------------------------------------


def _custom_bwd_without_state() -> None:
    def custom_bwd(bwd: Any = None, *, device_type: str) -> Any:
        if bwd is None:
            return functools.partial(custom_bwd, device_type=device_type)
        return bwd

    torch.amp.custom_bwd = custom_bwd


def _custom_fwd_ignores_cast_inputs() -> None:
    orig = torch.amp.custom_fwd

    def custom_fwd(fwd: Any = None, *, device_type: str, cast_inputs: Any = None) -> Any:
        return orig(fwd, device_type=device_type) if fwd is not None else orig(device_type=device_type)

    torch.amp.custom_fwd = custom_fwd


def _cast_also_float64(orig: Any) -> Any:
    def _cast(value: Any, device_type: str, dtype: Any) -> Any:
        if (
            isinstance(value, torch.Tensor)
            and value.dtype == torch.float64
            and value.device.type == device_type
        ):
            return value.to(dtype)
        return orig(value, device_type, dtype)

    return _cast


def _custom_casts_float64() -> None:
    """custom_fwd(cast_inputs=...) and register_autocast also cast float64 tensors."""
    import torch._library.custom_ops as custom_ops
    import torch.amp.autocast_mode as autocast_mode

    autocast_mode._cast = _cast_also_float64(autocast_mode._cast)
    custom_ops._cast = _cast_also_float64(custom_ops._cast)  # type: ignore[attr-defined]


def _custom_fwd_leaves_kwargs() -> None:
    orig = torch.amp.custom_fwd

    def custom_fwd(fwd: Any = None, *, device_type: str, cast_inputs: Any = None) -> Any:
        if fwd is None:
            return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

        def decorate(*args: Any, **kwargs: Any) -> Any:
            bound = functools.partial(fwd, **kwargs)  # the keyword inputs skip cast_inputs
            return orig(bound, device_type=device_type, cast_inputs=cast_inputs)(*args)

        return decorate

    torch.amp.custom_fwd = custom_fwd


def _register_autocast_ignored() -> None:
    import torch._library.custom_ops as custom_ops

    custom_ops.CustomOpDef.register_autocast = lambda self, device_type, cast_inputs: None  # type: ignore[method-assign]


def _jit_pass_off() -> None:
    torch._C._jit_set_autocast_mode(False)


def _compile_leaks_state_on_exception() -> None:
    orig = torch.compile

    def leaky(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except BaseException:
                torch.set_autocast_enabled("cpu", True)
                raise

        return call

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:
            return lambda m: leaky(orig(m, **kwargs))
        return leaky(orig(model, **kwargs))

    torch.compile = compile  # type: ignore[assignment]


def _reference_engine_leaves_lower_ops() -> None:
    import reference_impl.kernels.reference_autocast as ra
    from reference_impl.engine.policy import untouched_plan

    decide = ra.decide

    def broken(device: Any, rules: Any, state: Any, op: str, *rest: Any, **kw: Any) -> Any:
        entry = device.ops.get(op)
        if entry is not None and entry.policy is Policy.LOWER_PRECISION_FP:
            return untouched_plan(op, entry.policy, "mutant: lower_precision_fp ops left alone")
        return decide(device, rules, state, op, *rest, **kw)

    ra.decide = broken  # type: ignore[assignment]


OTHER_MUTANTS = [
    context_mutant(
        "custom-bwd-loses-state",
        "custom_function",
        "custom_bwd runs backward with the current autocast state, not the forward's",
        ("test_custom_function.py",),
        _custom_bwd_without_state,
    ),
    context_mutant(
        "custom-fwd-ignores-cast-inputs",
        "custom_function",
        "custom_fwd(cast_inputs=float32) neither casts the inputs nor disables autocast",
        ("test_custom_function.py",),
        _custom_fwd_ignores_cast_inputs,
    ),
    context_mutant(
        "custom-casts-float64",
        "custom_function",
        "custom_fwd(cast_inputs=...) and register_autocast cast float64 inputs too",
        ("test_custom_function.py", "test_custom_op.py"),
        _custom_casts_float64,
    ),
    context_mutant(
        "custom-fwd-leaves-kwargs",
        "custom_function",
        "custom_fwd(cast_inputs=...) casts positional inputs only, not keyword ones",
        ("test_custom_function.py",),
        _custom_fwd_leaves_kwargs,
    ),
    context_mutant(
        "custom-op-autocast-ignored",
        "custom_op",
        "torch.library.register_autocast registers nothing: custom ops run uncast (cuda, FakeTensors)",
        ("test_custom_op.py",),
        _register_autocast_ignored,
        options=CUDA_FAKE,
    ),
    context_mutant(
        "jit-autocast-pass-off",
        "jit",
        "TorchScript's autocast pass is off: scripted autocast regions are dropped",
        ("test_jit_limitations.py",),
        _jit_pass_off,
    ),
    context_mutant(
        "compile-leaks-state",
        "jit",
        "an exception escaping a compiled function leaves CPU autocast enabled",
        ("test_jit_limitations.py", "test_modes.py"),
        _compile_leaks_state_on_exception,
        keyword="compile",
        options=(*CPU, "--mode", "compile"),
    ),
    context_mutant(
        "reference-leaves-lower-ops",
        "self-conformance",
        "--implementation reference with a policy engine that leaves lower_precision_fp ops alone",
        ("test_op_policy.py", "test_numerics.py", "test_context.py"),
        _reference_engine_leaves_lower_ops,
        keyword=op_keyword("aten::mm") + " or test_nesting",
        options=(*CPU, "--implementation", "reference"),
    ),
]

MUTANTS: tuple[Mutant, ...] = (*POLICY_MUTANTS, *OP_MUTANTS, *CONTEXT_MUTANTS, *OTHER_MUTANTS)
BY_ID = {m.id: m for m in MUTANTS}


def check_catalogue() -> list[str]:
    """Problems with the catalogue against the bundled spec (empty: fine)."""
    spec = K.bundled()
    problems = []
    if len(BY_ID) != len(MUTANTS):
        problems.append("mutant ids are not unique")
    for m in MUTANTS:
        for device, op, policy in m.assumes:
            have = spec.device(device).policy_of(op)
            got = have.value if have is not None else None
            if got != policy:
                problems.append(
                    f"{m.id}: assumes {op} is {policy or 'unlisted'} on {device}, the spec says {got}"
                )
    return problems

"""Witnesses: small programs whose observable result (a dtype, a value, an exception, a state)
shows a reported bug. Each returns something JSON-able; an error is returned as
``"error: <Type>: <message>"`` (first line, shortened), so it is an observation too.

``python -m realbugs.show ID`` (see :mod:`realbugs.show`) runs an entry's witness before
and after installing its replay, in one fresh process.
"""

from __future__ import annotations

import gc
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.state import raw_autocast

WITNESSES: dict[str, Callable[[], Any]] = {}


def witness(fn: Callable[[], Any]) -> Callable[[], Any]:
    WITNESSES[fn.__name__] = fn
    return fn


def observe(fn: Callable[[], Any]) -> Any:
    """``fn()``, or the error it raised as a string."""
    try:
        return fn()
    except Exception as exc:
        return f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"


def name(dtype: Any) -> str:
    return dtype_name(dtype)


@contextmanager
def fake_cuda_autocast(dtype: torch.dtype = torch.float16) -> Iterator[None]:
    """CUDA autocast on FakeTensors (no GPU): the thread-local state set directly."""
    with FakeTensorMode(), raw_autocast("cuda", dtype):
        yield


def cpu_autocast(dtype: torch.dtype = torch.bfloat16, **kw: Any) -> torch.autocast:
    return torch.autocast("cpu", dtype=dtype, **kw)


# --- op lists ---------------------------------------------------------------


@witness
def conv_tbc_dtype() -> Any:
    with cpu_autocast():
        return observe(
            lambda: name(torch.conv_tbc(torch.randn(4, 2, 3), torch.randn(3, 3, 5), torch.randn(5)).dtype)
        )


@witness
def sdpa_mixed_inputs() -> Any:
    with fake_cuda_autocast():
        q, k = torch.empty(2, 4, 8, device="cuda"), torch.empty(2, 4, 8, device="cuda")
        v = torch.empty(2, 4, 8, device="cuda", dtype=torch.float16)
        return observe(lambda: name(F.scaled_dot_product_attention(q, k, v).dtype))


@witness
def einsum_dtype() -> Any:
    with fake_cuda_autocast():
        a, b = torch.empty(4, 8, device="cuda"), torch.empty(8, 3, device="cuda")
        return observe(lambda: name(torch.einsum("ij,jk->ik", a, b).dtype))


@witness
def layer_norm_half_inputs() -> Any:
    with fake_cuda_autocast():
        x = torch.empty(2, 4, device="cuda", dtype=torch.float16)
        w, b = (
            torch.empty(4, device="cuda", dtype=torch.float16),
            torch.empty(4, device="cuda", dtype=torch.float16),
        )
        return observe(lambda: name(F.layer_norm(x, (4,), w, b).dtype))


class OpLog(TorchDispatchMode):
    """The aten ops that ran below Autocast, and weak references to the casts' outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.casts: list[weakref.ref[torch.Tensor]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.ops.append(func.__name__)
        if func.__name__.startswith("_to_copy"):
            self.casts.append(weakref.ref(out))
        return out


@witness
def cat_mixed_inputs_ops() -> Any:
    with cpu_autocast(), OpLog() as log:
        torch.cat([torch.ones(2), torch.ones(2, dtype=torch.bfloat16)])
    return log.ops


@witness
def vmap_mm_dtype() -> Any:
    w = torch.randn(4, 3)
    with cpu_autocast():
        return name(torch.vmap(torch.mm, in_dims=(0, None))(torch.randn(2, 5, 4), w).dtype)


@witness
def bilinear_wide_bias() -> Any:
    with fake_cuda_autocast():
        x1, x2 = torch.empty(2, 3, device="cuda"), torch.empty(2, 4, device="cuda")
        w = torch.empty(5, 3, 4, device="cuda", dtype=torch.float16)
        bias = torch.empty(5, device="cuda")  # float32: the widest input
        return observe(lambda: name(torch.bilinear(x1.half(), x2.half(), w, bias).dtype))


@witness
def promote_mixed_lower_dtypes() -> Any:
    with cpu_autocast():
        return observe(
            lambda: name(
                torch.stack([torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.bfloat16)]).dtype
            )
        )


# --- cache -------------------------------------------------------------------


@witness
def grad_after_no_grad_forward() -> Any:
    x, w = torch.randn(2, 4), torch.randn(4, 4, requires_grad=True)

    def run() -> bool:
        with cpu_autocast():
            with torch.no_grad():
                torch.mm(x, w)
            y = torch.mm(x, w)
        y.float().sum().backward()
        return w.grad is not None

    return observe(run)


@witness
def cross_thread_cache_freed() -> Any:
    x, w = torch.randn(2, 4), torch.randn(4, 4, requires_grad=True)
    log, cast_done, checked = OpLog(), threading.Event(), threading.Event()

    def worker() -> None:  # like autograd's long-lived threads: autocast on, no region exit
        torch.set_autocast_enabled("cpu", True)
        with log:
            torch.mm(x, w)
        torch.set_autocast_enabled("cpu", False)
        cast_done.set()
        checked.wait(60)

    t = threading.Thread(target=worker)
    t.start()
    cast_done.wait(60)
    torch.clear_autocast_cache()
    gc.collect()
    alive = [ref() is not None for ref in log.casts]
    checked.set()
    t.join()
    return alive


@witness
def nested_dtype_switch() -> Any:
    lin, x = torch.nn.Linear(4, 4), torch.randn(2, 4)
    with cpu_autocast():
        lin(x)
        with cpu_autocast(torch.float16):
            return observe(lambda: name(lin(x).dtype))


# --- context state -----------------------------------------------------------


@witness
def dtype_getter_equality() -> Any:
    with cpu_autocast():
        return [
            torch.get_autocast_dtype("cpu") == torch.bfloat16,
            torch.get_autocast_cpu_dtype() == torch.bfloat16,
        ]


def _warnings_of(make: Callable[[], torch.autocast]) -> Any:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")

        def enter() -> bool:
            with make():
                return torch.is_autocast_enabled("cpu")

        result = observe(enter)
    return {"enabled": result, "warnings": [str(w.message) for w in seen]}


@witness
def unsupported_dtype_region() -> Any:
    return _warnings_of(lambda: cpu_autocast(torch.float64))


@witness
def unsupported_dtype_disabled_region() -> Any:
    return _warnings_of(lambda: cpu_autocast(torch.float64, enabled=False))


@witness
def any_autocast_enabled_in_region() -> Any:
    with cpu_autocast():
        return torch._C._is_any_autocast_enabled()


@witness
def new_thread_dtype() -> Any:
    seen: list[str] = []
    t = threading.Thread(target=lambda: seen.append(name(torch.get_autocast_dtype("cpu"))))
    t.start()
    t.join()
    return seen


# --- custom functions, checkpoint --------------------------------------------


def _scale(log: dict[str, Any], cast_inputs: torch.dtype | None) -> Any:
    class Scale(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=cast_inputs)
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            log.setdefault("fwd", []).append(name(x.dtype))
            return x * 2

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            log["bwd"] = name(torch.get_autocast_dtype("cpu"))
            return g * 2

    return Scale


@witness
def custom_fwd_input_dtypes() -> Any:
    log: dict[str, Any] = {}
    fn = _scale(log, torch.float32)
    fn.apply(torch.ones(2, dtype=torch.float16))  # outside any region
    with cpu_autocast():
        fn.apply(torch.ones(2, dtype=torch.float64))
    return log["fwd"]


@witness
def custom_bwd_dtype() -> Any:
    log: dict[str, Any] = {}
    x = torch.ones(4, requires_grad=True)
    with cpu_autocast(torch.float16):
        y = _scale(log, None).apply(x)
    y.sum().backward()
    return log["bwd"]


def _checkpointed_state() -> Any:
    from torch.utils.checkpoint import checkpoint

    seen: list[Any] = []

    def body(x: torch.Tensor) -> torch.Tensor:
        seen.append([torch.is_autocast_enabled("cpu"), name(torch.get_autocast_dtype("cpu"))])
        return torch.mm(x, x)

    x = torch.randn(4, 4, requires_grad=True)

    def run() -> Any:
        with cpu_autocast(torch.float16):
            y = checkpoint(body, x, use_reentrant=False)
        y.float().sum().backward()
        return seen  # [forward state, recompute state]

    return observe(run)


@witness
def checkpoint_recompute_state() -> Any:
    return _checkpointed_state()


# --- torch.compile -----------------------------------------------------------


def nesting() -> int:
    n = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return n - 1


@witness
def compiled_exception_in_region() -> Any:
    @torch.compile(backend="eager")
    def f(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
            if y.sum() > -1e9:
                raise NotImplementedError("boom")
            return y

    kind = observe(lambda: f(torch.randn(4, 4)))
    return {"raised": kind.split(":")[1].strip(), "nesting": nesting()}


@witness
def compiled_exception_nesting() -> Any:
    @torch.compile(backend="eager", fullgraph=True)
    def f(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x.index_select(0, idx)

    for _ in range(2):
        observe(lambda: f(torch.randn(4, 4), torch.tensor([99])))
    return {"nesting": nesting(), "enabled": torch.is_autocast_enabled("cpu")}


@witness
def compiled_backward_inner_disabled() -> Any:
    lin = torch.nn.Linear(8, 8)
    h = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)

    def inner(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", enabled=False):
            return x.float() @ lin.weight.float().T

    grads = []
    for fn in (inner, torch.compile(inner, backend="aot_eager")):
        lin.weight.grad = None
        with cpu_autocast():
            out = fn(h)
        out.sum().backward()
        grads.append(lin.weight.grad.clone())
    return torch.equal(grads[0], grads[1])


from . import witnesses_more  # noqa: E402,F401  (registers the witnesses of witnesses_more.py)

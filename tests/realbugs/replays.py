"""Replays: each reported autocast bug injected into the installed torch, as it behaved.

A replay is installed once per process (the suite subprocess, through
``realbugs.plugin``, or the witness subprocess) and stays for the rest of it. Kernel
replays register wrong Autocast kernels with ``torch.library`` (helpers from
``mutation.kernels``); the others monkeypatch the Python layer (``torch.autocast``,
``torch.amp.custom_fwd`` / ``custom_bwd``, ``torch.utils.checkpoint``, ``torch.compile``,
``threading``). Each function's docstring says what the report showed.
"""

from __future__ import annotations

import functools
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from mutation import kernels as K

from autocast_spec.model import Policy

AUTOCAST = torch.amp.autocast_mode.autocast
REPLAYS: dict[str, Callable[[], None]] = {}


def replay(fn: Callable[[], None]) -> Callable[[], None]:
    REPLAYS[fn.__name__] = fn
    return fn


# ---------------------------------------------------------------------------
# Op lists: an op under the wrong policy, or without an Autocast kernel
# ---------------------------------------------------------------------------


@replay
def conv_tbc_in_fp32_list() -> None:
    """CPU listed aten::conv_tbc (which supports bfloat16) under fp32."""
    K.move("cpu", "aten::conv_tbc", Policy.FP32)


@replay
def sdpa_not_autocast() -> None:
    """MPS had no autocast for scaled_dot_product_attention: mixed q/k/v dtypes reach the kernel."""
    K.drop("cuda", "aten::scaled_dot_product_attention")


@replay
def einsum_not_autocast() -> None:
    """XLA's autocast lists left out einsum: it runs in float32 under autocast."""
    K.drop("cuda", "aten::einsum")


@replay
def layer_norm_not_autocast() -> None:
    """IPEX (XPU) did not autocast layer_norm: float16 weights meet float32 inputs."""
    K.drop("cuda", "aten::layer_norm")


@replay
def cat_not_promoting() -> None:
    """CPU autocast's cat kernel passed mixed float32/bfloat16 inputs on uncast (no aten::to)."""
    K.drop("cpu", "aten::cat")


_IN_TRANSFORM = threading.local()


@replay
def autocast_skipped_under_functorch() -> None:
    """MPS: inside torch.vmap / torch.func.grad the Autocast kernels leave lower_precision_fp
    ops (mm, bmm, ...) in float32; outside transforms they cast as the spec says."""
    from reference_impl.engine.torch_registry import dispatch_key
    from reference_impl.kernels.reference_autocast import _make_kernel

    spec = K.bundled()
    dspec = spec.device("cpu")
    for op, entry in dspec.ops.items():
        if entry.policy is not Policy.LOWER_PRECISION_FP:
            continue
        cast = _make_kernel(op, dspec, spec, dispatch_key(dspec.dispatch_key))
        target = K.op_overload(op)

        def kernel(*args: Any, _cast: Any = cast, _target: Any = target, **kwargs: Any) -> Any:
            if not getattr(_IN_TRANSFORM, "on", False):
                return _cast(*args, **kwargs)
            with K.below_autocast("cpu"):
                return _target(*args, **kwargs)

        K.register(op, kernel, "cpu")

    def transformed(orig: Callable[..., Any]) -> Callable[..., Any]:
        def make(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
            inner = orig(fn, *args, **kwargs)

            def call(*a: Any, **kw: Any) -> Any:
                _IN_TRANSFORM.on = True
                try:
                    return inner(*a, **kw)
                finally:
                    _IN_TRANSFORM.on = False

            return call

        return make

    torch.vmap = torch.func.vmap = transformed(torch.func.vmap)  # type: ignore[assignment]
    torch.func.grad = transformed(torch.func.grad)


# ---------------------------------------------------------------------------
# The weight-cast cache
# ---------------------------------------------------------------------------


def _caching_kernel(ops: set[str], store: Callable[[], dict[int, tuple[torch.Tensor, torch.Tensor]]]) -> None:
    """Lower-precision casts with a weight cache like the native one (float32 leaves that
    require grad, not under inference_mode, only while cache_enabled), kept in ``store()``
    and cast in the ambient grad mode; ``torch.clear_autocast_cache`` clears ``store()``."""
    clear = torch.clear_autocast_cache

    def clear_both() -> None:
        store().clear()
        clear()

    torch.clear_autocast_cache = clear_both
    for op in ops:
        target = K.op_overload(op)

        def kernel(*args: Any, _target: Any = target, **kwargs: Any) -> Any:
            lower = torch.get_autocast_dtype("cpu")

            def cast(t: torch.Tensor) -> torch.Tensor:
                if not K.floating_on("cpu", t) or t.dtype == lower:
                    return t
                cacheable = (
                    torch.is_autocast_cache_enabled()
                    and t.dtype == torch.float32
                    and t.is_leaf
                    and t.requires_grad
                    and not torch.is_inference_mode_enabled()
                )
                if not cacheable:
                    return t.to(lower)
                hit = store().get(id(t))
                if hit is None or hit[0] is not t:
                    hit = store()[id(t)] = (t, t.to(lower))
                return hit[1]

            with K.below_autocast("cpu"):
                return _target(*K.map_tensors(args, cast), **K.map_tensors(kwargs, cast))

        K.register(op, kernel, "cpu")


def _cache_ops() -> set[str]:
    from mutation.catalogue import _sentinel_op

    return {"aten::mm", _sentinel_op()}


@replay
def cache_keeps_no_grad_casts() -> None:
    """A cast cached under no_grad (no autograd history) is reused after grad is re-enabled
    in the same region: the later forward's weights get no gradient."""
    cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    _caching_kernel(_cache_ops(), lambda: cache)


@replay
def cache_thread_local_clear() -> None:
    """The cache is per thread: torch.clear_autocast_cache() clears only the calling
    thread's, so casts cached by other threads (autograd's) are never freed."""
    local = threading.local()

    def store() -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        if not hasattr(local, "cache"):
            local.cache = {}
        return local.cache  # type: ignore[no-any-return]

    _caching_kernel(_cache_ops(), store)


# ---------------------------------------------------------------------------
# Context state: getters, unsupported dtypes, threads
# ---------------------------------------------------------------------------


class _FreshDtype:
    """A new object per call that prints like the dtype but is not it (``==`` is identity)."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype

    def __repr__(self) -> str:
        return repr(self.dtype)


@replay
def dtype_getter_returns_new_object() -> None:
    """get_autocast_*_dtype() built a new dtype object per call: ``== torch.bfloat16`` is False."""
    get, set_ = torch.get_autocast_dtype, torch.set_autocast_dtype

    def unwrap(d: Any) -> Any:
        return d.dtype if isinstance(d, _FreshDtype) else d

    torch.get_autocast_dtype = lambda device_type: _FreshDtype(get(device_type))  # type: ignore[assignment,return-value]
    torch.get_autocast_cpu_dtype = lambda: _FreshDtype(get("cpu"))  # type: ignore[assignment,return-value]
    torch.set_autocast_dtype = lambda device_type, dtype: set_(device_type, unwrap(dtype))  # type: ignore[assignment]


def _cpu_unsupported(self: Any) -> bool:
    return self.device == "cpu" and self.fast_dtype not in (torch.bfloat16, torch.float16)


@replay
def unsupported_dtype_raises_on_enter() -> None:
    """CPU autocast warned 'Disabling autocast' for an unsupported dtype, then raised on entry."""
    enter = AUTOCAST.__enter__

    def __enter__(self: Any) -> Any:
        if _cpu_unsupported(self):
            raise RuntimeError("Currently, AutocastCPU only support Bfloat16 as the autocast_cpu_dtype")
        return enter(self)

    AUTOCAST.__enter__ = __enter__  # type: ignore[method-assign]


@contextmanager
def _rewritten_warnings(rewrite: Callable[[str], str]) -> Iterator[None]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        yield
    for w in seen:
        warnings.warn_explicit(rewrite(str(w.message)), w.category, w.filename, w.lineno)


@replay
def unsupported_dtype_message_wrong() -> None:
    """MPS's unsupported-dtype warning named the wrong supported dtype (bfloat16 instead of float16)."""
    init = AUTOCAST.__init__
    wrong = "Autocast only supports dtype of torch.bfloat16 currently."

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        with _rewritten_warnings(lambda m: re.sub(r"Autocast only supports .*currently\.", wrong, m)):
            init(self, *args, **kwargs)

    AUTOCAST.__init__ = __init__  # type: ignore[method-assign]


@replay
def unsupported_dtype_warns_when_disabled() -> None:
    """autocast(enabled=False) with an unsupported dtype still warned 'Disabling autocast'."""
    init = AUTOCAST.__init__

    def __init__(self: Any, device_type: str, dtype: Any = None, enabled: bool = True, **kw: Any) -> None:
        init(self, device_type, dtype=dtype, enabled=enabled, **kw)
        if not enabled and _cpu_unsupported(self):
            warnings.warn(
                "In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                "CPU Autocast only supports dtypes of torch.bfloat16, torch.float16 currently.",
                stacklevel=2,
            )

    AUTOCAST.__init__ = __init__  # type: ignore[method-assign]


@replay
def any_enabled_ignores_device() -> None:
    """is_any_autocast_enabled() left one device (PrivateUse1) out: False inside its region."""
    devices = ("cuda", "xpu", "hpu", "mps", "mtia", "maia")
    torch._C._is_any_autocast_enabled = lambda: any(  # type: ignore[assignment]
        torch.is_autocast_enabled(d) for d in devices if torch.amp.is_autocast_available(d)
    )


@replay
def new_threads_get_other_dtype() -> None:
    """The backend set its default autocast dtype only in the importing thread; other
    threads start with another one (float16 where the device default is bfloat16)."""
    run = threading.Thread.run

    def patched_run(self: threading.Thread) -> None:
        torch.set_autocast_dtype("cpu", torch.float16)
        run(self)

    threading.Thread.run = patched_run  # type: ignore[method-assign]


# ---------------------------------------------------------------------------
# custom_fwd / custom_bwd, checkpoint
# ---------------------------------------------------------------------------


def _cast_everything(value: Any, device: str, dtype: torch.dtype) -> Any:
    """The old custom_fwd cast: every floating tensor of the device, float64 included."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() and value.device.type == device else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_everything(v, device, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_everything(v, device, dtype) for k, v in value.items()}
    return value


@replay
def custom_fwd_casts_unconditionally() -> None:
    """custom_fwd(cast_inputs=...) cast inputs outside autocast regions too, float64 included."""
    orig = torch.amp.custom_fwd

    def custom_fwd(fwd: Any = None, *, device_type: str, cast_inputs: Any = None) -> Any:
        if fwd is None:
            return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
        if cast_inputs is None:
            return orig(fwd, device_type=device_type)

        @functools.wraps(fwd)
        def decorate_fwd(*args: Any, **kwargs: Any) -> Any:
            args[0]._dtype = torch.get_autocast_dtype(device_type)
            args[0]._fwd_used_autocast = False
            with torch.autocast(device_type=device_type, enabled=False):
                return fwd(
                    *_cast_everything(args, device_type, cast_inputs),
                    **_cast_everything(kwargs, device_type, cast_inputs),
                )

        return decorate_fwd

    torch.amp.custom_fwd = custom_fwd


@replay
def custom_bwd_default_dtype() -> None:
    """custom_bwd re-entered autocast without the forward's dtype: backward ran in the default."""

    def custom_bwd(bwd: Any = None, *, device_type: str) -> Any:
        if bwd is None:
            return functools.partial(custom_bwd, device_type=device_type)

        @functools.wraps(bwd)
        def decorate_bwd(*args: Any, **kwargs: Any) -> Any:
            with torch.autocast(device_type=device_type, enabled=args[0]._fwd_used_autocast):
                return bwd(*args, **kwargs)

        return decorate_bwd

    torch.amp.custom_bwd = custom_bwd


def _patch_checkpoint_kwargs(change: Callable[[dict[str, Any]], None]) -> None:
    import torch.utils.checkpoint as ckpt

    get = ckpt._get_autocast_kwargs

    def patched(device_type: str = "cuda") -> Any:
        device_kwargs, cpu_kwargs = get(device_type)
        for kw in (device_kwargs, cpu_kwargs):
            if kw is not None:
                change(kw)
        return device_kwargs, cpu_kwargs

    ckpt._get_autocast_kwargs = patched


@replay
def checkpoint_recompute_default_dtype() -> None:
    """checkpoint's forward-in-backward re-entered autocast with the default dtype, not the forward's."""
    _patch_checkpoint_kwargs(lambda kw: kw.pop("dtype"))


@replay
def checkpoint_recompute_without_autocast() -> None:
    """checkpoint's recompute did not re-enter the device's autocast (XLA): it ran in float32."""
    _patch_checkpoint_kwargs(lambda kw: kw.update(enabled=False))


@replay
def checkpoint_queries_missing_module() -> None:
    """checkpoint asked the device module for is_autocast_enabled, which it lacks (MPS)."""
    import torch.utils.checkpoint as ckpt

    def broken(device_type: str = "cuda") -> Any:
        raise AttributeError(f"module 'torch.{device_type}' has no attribute 'is_autocast_enabled'")

    ckpt._get_autocast_kwargs = broken


# ---------------------------------------------------------------------------
# torch.compile
# ---------------------------------------------------------------------------


@replay
def compile_crashes_on_exception_in_autocast() -> None:
    """Dynamo crashed with an AttributeError when the compiled code raised inside autocast."""
    orig = torch.compile

    def crashing(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                raise AttributeError("'NoneType' object has no attribute 'is_python_constant'") from exc

        return call

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:
            return lambda m: crashing(orig(m, **kwargs))
        return crashing(orig(model, **kwargs))

    torch.compile = compile  # type: ignore[assignment]


from . import replays_more  # noqa: E402,F401  (registers the replays of replays_more.py)

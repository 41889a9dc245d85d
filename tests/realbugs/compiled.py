"""Bugs of compiled autocast: torch.compile and torch.export with regions that raise, recompute,
disable, nest or break the graph, the guards that tell one autocast state from another, and
inductor's rewrites (a fusion, a decomposition) of the ops a region casts."""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch._dynamo.resume_execution import ReenterWith
from torch._dynamo.symbolic_convert import BlockStackEntry
from torch._dynamo.variables.ctx_manager import AutocastModeVariable
from torch.fx.experimental.proxy_tensor import PreDispatchTorchFunctionMode

from .registry import AUTOCAST, cpu_autocast, name, observe, replay, witness

# --- replays ------------------------------------------------------------


def wrap_compiled(wrap: Callable[[Any], Any]) -> None:
    """Patch torch.compile so that every function it returns is ``wrap(compiled)``."""
    orig = torch.compile

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if model is None:
            return lambda m: wrap(orig(m, **kwargs))
        return wrap(orig(model, **kwargs))

    torch.compile = compile  # type: ignore[assignment]


@replay
def compile_crashes_on_exception_in_autocast() -> None:
    """Dynamo crashed with an AttributeError when the compiled code raised inside autocast."""

    def crashing(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                raise AttributeError("'NoneType' object has no attribute 'is_python_constant'") from exc

        return call

    wrap_compiled(crashing)


@replay
def graph_break_resumes_without_region() -> None:
    """After a graph break inside an autocast region, the resume frame Dynamo generated
    re-entered the region disabled: the code after the break ran without autocast."""
    orig = BlockStackEntry.resume_fn

    def resume_fn(self: Any) -> Any:
        if isinstance(self.with_context, AutocastModeVariable):
            device, dtype, _, cache = self.with_context.target_values
            return ReenterWith(self.stack_index - 1, (device, dtype, False, cache))
        return orig(self)

    BlockStackEntry.resume_fn = resume_fn  # type: ignore[method-assign]


@replay
def nested_region_keeps_outer_state() -> None:
    """A region nested in a compiled region (enabled=False, another dtype) took the outer
    region's state: its ops ran in the outer dtype (inductor's "invalid dtype for bias")."""
    orig = torch.amp._enter_autocast

    def enter(*vals: Any) -> Any:
        device = vals[0]
        if torch.is_autocast_enabled(device):
            vals = (device, torch.get_autocast_dtype(device), True, *vals[3:])
        return orig(*vals)

    torch.amp._enter_autocast = enter


@replay
def dynamic_graph_traced_without_autocast() -> None:
    """torch.compile(dynamic=True): the graph is traced without the autocast state it then runs
    under, so autocast applies again at run time to ops traced outside it (a disabled region's)."""
    orig = torch.compile

    def untraced(backend: Callable[..., Any]) -> Callable[..., Any]:
        def compile_fx(gm: Any, example_inputs: Any) -> Any:
            with contextlib.ExitStack() as stack:
                for device in ("cpu", "cuda"):
                    if torch.is_autocast_enabled(device):
                        stack.enter_context(AUTOCAST(device, enabled=False))
                return backend(gm, example_inputs)

        return compile_fx

    def compile(model: Any = None, **kwargs: Any) -> Any:
        if kwargs.get("dynamic") is True:
            kwargs["backend"] = untraced(torch._dynamo.lookup_backend(kwargs.get("backend", "inductor")))
        return orig(**kwargs) if model is None else orig(model, **kwargs)

    torch.compile = compile  # type: ignore[assignment]


@replay
def compiled_entry_ignores_autocast_state() -> None:
    """A compiled function's cached entry was used whatever the autocast state of the call (the
    compile cache's saved guards held the state of the save): the first compiled graph, with the
    casts of the state it was compiled in, also served calls in other states."""

    def state() -> tuple[bool, torch.dtype]:
        return torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")

    def reused(compiled: Callable[..., Any]) -> Callable[..., Any]:
        saved: list[tuple[bool, torch.dtype]] = []

        @functools.wraps(compiled)
        def call(*args: Any, **kwargs: Any) -> Any:
            now = state()
            if not saved:
                saved.append(now)
            torch.set_autocast_enabled("cpu", saved[0][0])
            torch.set_autocast_dtype("cpu", saved[0][1])
            try:
                return compiled(*args, **kwargs)
            finally:
                torch.set_autocast_enabled("cpu", now[0])
                torch.set_autocast_dtype("cpu", now[1])

        return call

    wrap_compiled(reused)


@replay
def export_exit_swallows_exception() -> None:
    """Under export's pre-dispatch tracing autocast's __exit__ returned a true value: an exception
    raised in the region was swallowed ("UnboundLocalError" on the region's result)."""
    orig = AUTOCAST.__exit__

    def __exit__(self: Any, *exc: Any) -> Any:
        result = orig(self, *exc)
        modes = torch.overrides._get_current_function_mode_stack()
        return True if any(isinstance(m, PreDispatchTorchFunctionMode) for m in modes) else result

    AUTOCAST.__exit__ = __exit__  # type: ignore[method-assign]


@replay
def legacy_alias_binds_like_autocast() -> None:
    """Dynamo bound torch.cpu/cuda.amp.autocast's positional arguments against torch.autocast's
    signature: autocast(False) bound False to device_type, so enabled stayed True."""
    orig = AutocastModeVariable.create

    def create(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        if func is not AUTOCAST and args:
            bound = inspect.signature(AUTOCAST).bind_partial(*args).arguments
            kwargs = {**{k: v for k, v in bound.items() if k != "device_type"}, **kwargs}
            args = ()
        return orig(func, args, kwargs)

    AutocastModeVariable.create = staticmethod(create)  # type: ignore[method-assign,assignment]


@replay
def inductor_fuses_mixed_dtype_addmm() -> None:
    """Inductor's post-grad pattern fusing ``add(mm(a, b), inp)`` into ``addmm(inp, a, b)`` did
    not compare dtypes (pytorch#159492): under autocast a bias-free linear's bfloat16 output
    added to a float32 tensor became an addmm of a float32 input and bfloat16 matrices ("self
    and mat2 must have the same dtype, but got Float and BFloat16" in the generated code). The
    installed compiler's cached graphs are turned off: a different inductor has other keys."""
    from torch._inductor.fx_passes import post_grad

    def any_dtype(match: Any) -> bool:  # is_valid_addmm_fusion without its dtype comparison
        mat1, mat2 = match.args
        inp = match.kwargs["inp"]
        if not (isinstance(inp, torch.fx.Node) and isinstance(inp.meta["val"], torch.Tensor)):
            return False
        shape = (mat1.meta["val"].shape[0], mat2.meta["val"].shape[1])
        return post_grad.is_expandable_to(inp.meta["val"].shape, shape)

    patched = 0
    for entries in post_grad.pass_patterns[2].patterns.values():
        for entry in entries:
            if getattr(entry, "extra_check", None) is post_grad.is_valid_addmm_fusion:
                entry.extra_check = any_dtype
                patched += 1
    assert patched, "inductor's add + mm -> addmm patterns not found"
    torch.compiler.config.force_disable_caches = True


# --- witnesses ----------------------------------------------------------


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


def _mm_dtypes(fn: Callable[..., Any], *args: Any) -> list[str]:
    return [name(t.dtype) for t in fn(*args)]


@witness
def compiled_graph_break_in_region() -> Any:
    def f(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with cpu_autocast():
            x = a @ a
            torch._dynamo.graph_break()
            return x, a @ a

    return _mm_dtypes(torch.compile(f, backend="eager"), torch.rand(4, 4))


@witness
def compiled_nested_regions() -> Any:
    def f(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with cpu_autocast():
            with cpu_autocast(enabled=False):
                x = a @ a
            with cpu_autocast(torch.float16):
                return x, a @ a

    return _mm_dtypes(torch.compile(f, backend="eager", fullgraph=True), torch.rand(4, 4))


@witness
def compiled_dynamic_inner_disabled() -> Any:
    def f(a: torch.Tensor) -> tuple[torch.Tensor]:
        with cpu_autocast(enabled=False):
            return (a @ a,)

    c = torch.compile(f, backend="aot_eager", dynamic=True)
    with cpu_autocast():
        return _mm_dtypes(c, torch.rand(4, 4)) + _mm_dtypes(c, torch.rand(6, 6))


@witness
def compiled_reused_outside_region() -> Any:
    c = torch.compile(lambda a: (a @ a,), backend="eager")
    a = torch.rand(4, 4)
    with cpu_autocast():
        inside = _mm_dtypes(c, a)
    return inside + _mm_dtypes(c, a)


@witness
def exported_exception_in_region() -> Any:
    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with cpu_autocast():
                y = x @ torch.ones(5, 5)
            return y

    return observe(lambda: torch.export.export(Model(), (torch.rand(4, 4),), strict=False))


@witness
def compiled_legacy_alias_positional() -> Any:
    def f(a: torch.Tensor) -> tuple[torch.Tensor]:
        with torch.cpu.amp.autocast(False):
            return (a @ a,)

    with cpu_autocast():
        return _mm_dtypes(torch.compile(f, backend="eager", fullgraph=True), torch.rand(4, 4))


@witness
def exported_composites_decomposed() -> Any:
    class Model(torch.nn.Module):
        def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
            with cpu_autocast():
                return a @ a, torch.einsum("ij,jk->ik", a, a), torch.tensordot(a, a, dims=1)

    a = torch.rand(4, 4)
    ep = torch.export.export(Model(), (a,), strict=False)
    return _mm_dtypes(ep.run_decompositions().module(), a)


@witness
def compiled_linear_plus_float32() -> Any:
    lin = torch.nn.Linear(16, 16, bias=False)

    def f(x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return residual + lin(x)  # a bfloat16 linear output added to a float32 tensor

    c = torch.compile(f, backend="inductor")
    with cpu_autocast():
        return observe(lambda: name(c(torch.randn(8, 16), torch.randn(8, 16)).dtype))


class _TriangleMultiplication(torch.nn.Module):
    """pytorch#168126's layer (Boltz's TriangleMultiplicationOutgoing): layer norms whose float32
    outputs feed linears that autocast rounds to bfloat16."""

    def __init__(self, dim: int = 128) -> None:
        super().__init__()
        self.norm_in = torch.nn.LayerNorm(dim)
        self.p_in = torch.nn.Linear(dim, 2 * dim, bias=False)
        self.g_in = torch.nn.Linear(dim, 2 * dim, bias=False)
        self.norm_out = torch.nn.LayerNorm(dim)
        self.p_out = torch.nn.Linear(dim, dim, bias=False)
        self.g_out = torch.nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm_in(x)
        x_in = x
        x = self.p_in(x) * self.g_in(x).sigmoid()
        a, b = torch.chunk(x.float(), 2, dim=-1)
        x = torch.einsum("bikd,bjkd->bijd", a, b)
        return self.p_out(self.norm_out(x)) * self.g_out(x_in).sigmoid()


@witness
def compiled_layer_norm_chain() -> Any:
    """Bitwise equality with eager under bfloat16 autocast: aot_eager runs eager's kernels;
    aot_eager_decomp_partition decomposes native_layer_norm (the report's bisection); inductor
    under emulate_precision_casts rounds where eager rounds (the suite's bitwise pass)."""
    import torch._inductor.config

    torch.manual_seed(0)
    m = _TriangleMultiplication()
    x = torch.randn(1, 32, 32, 128)
    runs = (("aot_eager", False), ("aot_eager_decomp_partition", False), ("inductor", True))
    equal = {}
    with cpu_autocast():
        eager = m(x)
        for backend, emulate in runs:
            torch._dynamo.reset()
            with torch._inductor.config.patch(emulate_precision_casts=emulate):
                out = torch.compile(m, backend=backend)(x)
            equal[backend + ("_emulate_precision_casts" if emulate else "")] = torch.equal(out, eager)
    return equal

"""Planted bugs in torch's compiled and exported paths, one or more per dimension of the generated
programs' grammar (issue 37), for tests/test_programs.py.

Each plant changes one torch internal on the compiled/exported path only (eager autocast is left
alone, so eager stays the oracle) through pytest's ``monkeypatch``, so it is undone after the
test. What each plant breaks is what a release of torch broke, or could: the research behind them
names the public report where one exists (pytorch#112260 guards, #102414 a helper's region
leaking on a graph break, #95837 the resumed frame's region, #86515 AOTAutograd's runtime
wrapper, #114693 custom_fwd under compile, #131829/#137495 export's regions).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import pytest
import torch

Plant = Callable[[pytest.MonkeyPatch], None]
PLANTS: dict[str, Plant] = {}


def plant(fn: Plant) -> Plant:
    PLANTS[fn.__name__] = fn
    return fn


def _region_off() -> contextlib.AbstractContextManager[Any]:
    return torch.autocast("cpu", enabled=False)


@plant
def guards(mp: pytest.MonkeyPatch) -> None:
    """Dynamo's global-state guard ignores the autocast dtype: a graph compiled under one dtype
    serves a call under another (pytorch#112260)."""
    from torch._dynamo.guards import GuardBuilder

    def global_state(self: Any, guard: Any) -> None:
        gs = self.check_fn_manager.output_graph.global_state_guard
        self.check_fn_manager.global_state = gs
        saved = json.loads(gs.__getstate__())

        def check(_: Any) -> bool:
            now = json.loads(torch._C._dynamo.guards.GlobalStateGuard().__getstate__())
            now["autocast_state"]["dtype"] = saved["autocast_state"]["dtype"]
            return bool(now == saved)

        self.guard_manager.root.add_lambda_guard(check, ["autocast dtype ignored"], guard.user_stack)

    mp.setattr(GuardBuilder, "GLOBAL_STATE", global_state)


@plant
def recompile(mp: pytest.MonkeyPatch) -> None:
    """A graph recompiled with dynamic shapes is handed to the backend outside the ambient region."""
    from torch._dynamo.output_graph import OutputGraph

    orig = OutputGraph.call_user_compiler

    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        def symbolic(n: Any) -> bool:
            shape = getattr(n.meta.get("example_value"), "shape", None)
            return isinstance(shape, torch.Size) and any(isinstance(s, torch.SymInt) for s in shape)

        dynamic = any(symbolic(n) for n in gm.graph.nodes if n.op == "placeholder")
        off = dynamic and torch.is_autocast_enabled("cpu")
        with _region_off() if off else contextlib.nullcontext():
            return orig(self, gm, example_inputs)

    mp.setattr(OutputGraph, "call_user_compiler", call_user_compiler)


@plant
def aot_runtime_inference(mp: pytest.MonkeyPatch) -> None:
    """Only the inference (no_grad, inference_mode) runtime wrapper stops disabling autocast."""
    import torch._functorch._aot_autograd.runtime_wrappers as rw

    orig = rw._codegen_compiled_fn_invocation

    def invocation(lines: Any, globs: Any, trace_joint: Any, idx: Any, disable_amp: Any) -> Any:
        return orig(lines, globs, trace_joint, idx, disable_amp and trace_joint)

    mp.setattr(rw, "_codegen_compiled_fn_invocation", invocation)


@plant
def decorator(mp: pytest.MonkeyPatch) -> None:
    """A captured autocast object (a decorator's, a stored region) is entered disabled under compile."""
    from torch._dynamo.variables.ctx_manager import AutocastModeVariable

    orig = AutocastModeVariable.__init__

    def init(self: Any, target_values: Any, initial_values: Any = None, **kw: Any) -> None:
        if kw.get("source") is not None:
            target_values = [target_values[0], target_values[1], False, target_values[3]]
        orig(self, target_values, initial_values, **kw)

    mp.setattr(AutocastModeVariable, "__init__", init)


@plant
def legacy_alias(mp: pytest.MonkeyPatch) -> None:
    """torch.cpu.amp.autocast is bound to device 'cuda' under compile."""
    from torch._dynamo.variables.ctx_manager import AutocastModeVariable

    orig = AutocastModeVariable.create

    def create(func: Any, args: Any, kwargs: Any) -> Any:
        v = orig(func, args, kwargs)
        if func is torch.cpu.amp.autocast:
            v.target_values = ["cuda", *v.target_values[1:]]
        return v

    mp.setattr(AutocastModeVariable, "create", staticmethod(create))


@plant
def nested_device(mp: pytest.MonkeyPatch) -> None:
    """A nested region of another device type is applied to the enclosing region's device."""
    from torch._dynamo.variables.ctx_manager import AutocastModeVariable

    orig = AutocastModeVariable.enter

    def enter(self: Any, tx: Any) -> Any:
        if self.target_values[0] != "cpu" and torch.is_autocast_enabled("cpu"):
            self.target_values = ["cpu", *self.target_values[1:]]
        return orig(self, tx)

    mp.setattr(AutocastModeVariable, "enter", enter)


@plant
def deep_break_resume(mp: pytest.MonkeyPatch) -> None:
    """The frame resumed after a graph break re-enters the enclosing region disabled (pytorch#95837)."""
    from torch._dynamo.resume_execution import ReenterWith
    from torch._dynamo.symbolic_convert import BlockStackEntry
    from torch._dynamo.variables.ctx_manager import AutocastModeVariable

    orig = BlockStackEntry.resume_fn

    def resume_fn(self: Any) -> Any:
        if isinstance(self.with_context, AutocastModeVariable):
            device, dtype, _, cache = self.with_context.target_values
            return ReenterWith(self.stack_index - 1, (device, dtype, False, cache))
        return orig(self)

    mp.setattr(BlockStackEntry, "resume_fn", resume_fn)


@plant
def custom_fwd_cast(mp: pytest.MonkeyPatch) -> None:
    """custom_fwd(cast_inputs=...) does not cast under compile (pytorch#114693's area)."""
    import torch.amp.autocast_mode as am

    orig = am._cast

    def cast(value: Any, device_type: str, dtype: Any) -> Any:
        return value if torch.compiler.is_compiling() else orig(value, device_type, dtype)

    mp.setattr(am, "_cast", cast)


@plant
def checkpoint(mp: pytest.MonkeyPatch) -> None:
    """AOTAutograd traces a checkpointed block outside the region that encloses it."""
    import torch._higher_order_ops.wrap as w

    orig = w.tag_activation_checkpoint_impl

    def impl(gmod: Any, *args: Any, **kwargs: Any) -> Any:
        with _region_off():
            return orig(gmod, *args, **kwargs)

    mp.setattr(w, "tag_activation_checkpoint_impl", impl)


def _traced_without_region(mp: pytest.MonkeyPatch, module: str, name: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    orig = getattr(mod, name)

    def wrapped(fn: Any, *a: Any, **k: Any) -> Any:
        def body(*args: Any, **kwargs: Any) -> Any:
            with _region_off():
                return fn(*args, **kwargs)

        return orig(body, *a, **k)

    mp.setattr(mod, name, wrapped)


@plant
def hop_cond(mp: pytest.MonkeyPatch) -> None:
    """torch.cond's branches are traced outside the region that encloses the cond."""
    _traced_without_region(mp, "torch._higher_order_ops.cond", "reenter_make_fx")


@plant
def hop_invoke_subgraph(mp: pytest.MonkeyPatch) -> None:
    """A nested_compile_region's body (invoke_subgraph) is traced outside the enclosing region."""
    _traced_without_region(mp, "torch._higher_order_ops.invoke_subgraph", "_maybe_reenter_make_fx")
    _traced_without_region(mp, "torch._higher_order_ops.invoke_subgraph", "reenter_make_fx")


@plant
def hop_flex(mp: pytest.MonkeyPatch) -> None:
    """flex_attention's AutocastCPU kernel does not cast when torch.compile traces it."""
    from torch._C import DispatchKey
    from torch._higher_order_ops.flex_attention import flex_attention as hop

    orig = hop.py_kernels[DispatchKey.AutocastCPU]

    def kernel(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(DispatchKey.AutocastCPU)):
                return hop(query, key, value, *args, **kwargs)
        return orig(query, key, value, *args, **kwargs)

    mp.setitem(hop.py_kernels, DispatchKey.AutocastCPU, kernel)
    mp.setattr(hop, "_dispatch_cache", {})  # a cache of its own: undone, the old one is back


@plant
def aot_runtime(mp: pytest.MonkeyPatch) -> None:
    """AOTAutograd's runtime wrapper no longer disables autocast around the traced graph, so a
    region around the call casts the graph's ops again (pytorch#86515 reverted)."""
    import torch._functorch._aot_autograd.runtime_wrappers as rw

    orig = rw._codegen_compiled_fn_invocation

    def invocation(lines: Any, globs: Any, trace_joint: Any, idx: Any, disable_amp: Any) -> Any:
        return orig(lines, globs, trace_joint, idx, False)

    mp.setattr(rw, "_codegen_compiled_fn_invocation", invocation)


@plant
def export_drop_region(mp: pytest.MonkeyPatch) -> None:
    """Export inlines a region's nodes instead of wrapping them in wrap_with_autocast."""
    import torch._export.passes.replace_autocast_with_hop_pass as p
    from torch._export.utils import node_inline_

    def replace_with_hop(node: Any) -> None:
        sub = getattr(node.graph.owning_module, node.target)
        for n in [n for n in sub.graph.nodes if p._is_autocast_node(n)][::-1]:
            sub.graph.erase_node(n)
        sub.recompile()
        node_inline_(node)

    mp.setattr(p, "_replace_with_hop", replace_with_hop)


@plant
def run_decompositions(mp: pytest.MonkeyPatch) -> None:
    """wrap_with_autocast runs its body without its region while it is traced again
    (run_decompositions, AOTInductor's trace); ep.module() is unaffected."""
    import torch._higher_order_ops.wrap as w
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    orig = w.WrapWithAutocast.__call__

    def call(
        self: Any, device_type: Any, dtype: Any, enabled: Any, cache: Any, fn: Any, *a: Any, **k: Any
    ) -> Any:
        if get_proxy_mode() is not None:
            return fn(*a, **k)
        return orig(self, device_type, dtype, enabled, cache, fn, *a, **k)

    mp.setattr(w.WrapWithAutocast, "__call__", call)


@plant
def freezing(mp: pytest.MonkeyPatch) -> None:
    """Inductor's constant folding (freezing) folds a frozen Parameter's cast to the uncast value."""
    from torch._inductor.constant_folding import ConstantFolder

    orig = ConstantFolder.run_node
    casts = (torch.ops.prims.convert_element_type.default, torch.ops.aten._to_copy.default)

    def run_node(self: Any, node: Any) -> Any:
        out = orig(self, node)
        lower = isinstance(out, torch.Tensor) and out.dtype in (torch.bfloat16, torch.float16)
        if node.target in casts and lower:
            src = self.env.get(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
            if isinstance(src, torch.Tensor) and src.dtype == torch.float32:
                return src
        return out

    mp.setattr(ConstantFolder, "run_node", run_node)


@plant
def aoti(mp: pytest.MonkeyPatch) -> None:
    """AOTInductor compiles the exported program with its wrap_with_autocast regions disabled."""
    import torch._inductor.compile_fx as cf

    orig = cf.compile_fx_aot

    def compile_fx_aot(gm: Any, *a: Any, **k: Any) -> Any:
        for mod in gm.modules():
            if isinstance(mod, torch.fx.GraphModule):
                for n in mod.graph.nodes:
                    if n.op == "call_function" and n.target is torch.ops.higher_order.wrap_with_autocast:
                        n.args = (n.args[0], n.args[1], False, *n.args[3:])
                mod.recompile()
        return orig(gm, *a, **k)

    mp.setattr(cf, "compile_fx_aot", compile_fx_aot)

"""The grammar features a program uses, by name (:func:`features`), and every feature the grammar
can draw on a device (:func:`grammar_features`).

A feature is a short string such as ``region:decorator:method``, ``nested:device``,
``break:item@2`` or ``policy:promote``. The tests hold that every feature the grammar can draw
is drawn within the default budget; a campaign's finding names the features its program needs;
the passes say which features they cannot take (:mod:`.passes`).
"""

from __future__ import annotations

from collections.abc import Iterator

from .grammar import Grammar
from .tree import (
    Block,
    Boundary,
    Break,
    CacheSwitch,
    Call,
    Cond,
    CustomFunction,
    Escape,
    FlexAttention,
    Form,
    GradMode,
    GraphBreak,
    Holder,
    Mix,
    OpCall,
    Program,
    Ref,
    Region,
    RegionForm,
    SecondKind,
    Stmt,
    Wrap,
    op_refs,
    walk,
)


def region_features(r: Region, enclosing: Region | None, crossed: bool) -> Iterator[str]:
    a = r.autocast
    yield "region:any"  # the program holds a region of its own (any form)
    yield f"region:{r.form.value}" + (f":{r.boundary.value}" if r.form is RegionForm.DECORATOR else "")
    if not a.takes_device:
        yield "region:legacy"
    if a.cache_enabled is False:
        yield "region:cache_disabled"
    if enclosing is None:
        return
    outer = enclosing.autocast
    if a.device != outer.device:
        yield "nested:device"
    elif not a.enabled:
        yield "nested:disabled"
    elif a.dtype != outer.dtype:
        yield "nested:dtype"
    if crossed or r.form is RegionForm.DECORATOR:  # a helper's region, or a decorated helper
        yield "nested:across_function"


def statement_features(s: Stmt, depth: int) -> Iterator[str]:
    if isinstance(s, OpCall):
        yield f"policy:{s.policy}"
        yield f"inputs:{s.inputs}"
        yield "call:aten_overload" if s.entry == s.op else "call:entry_point"
    elif isinstance(s, Mix):
        yield "residual"
    elif isinstance(s, Call):
        yield f"call:{s.boundary.value}"
        if s.boundary is Boundary.SUBMODULE:
            yield "submodule"
        if s.wrap is not Wrap.PLAIN:
            yield f"wrap:{s.wrap.value}"
        if s.wrap is Wrap.NESTED:
            yield "hop:invoke_subgraph"
    elif isinstance(s, GraphBreak):
        yield f"break:{s.kind.value}"
        yield f"break@{depth}"
    elif isinstance(s, Escape):
        yield "exception"
    elif isinstance(s, CustomFunction):
        yield "custom_function:" + ("cast_inputs" if s.cast_inputs else "plain")
    elif isinstance(s, CacheSwitch):
        yield "cache_switch"
    elif isinstance(s, Cond):
        yield "hop:cond"
    elif isinstance(s, FlexAttention):
        yield "hop:flex_attention"


def tensor_refs(s: Stmt) -> Iterator[Ref]:
    if isinstance(s, OpCall):
        yield from op_refs(s)
    elif isinstance(s, Mix):
        yield from (s.a, s.b)


def features(program: Program) -> frozenset[str]:
    """Every grammar feature ``program`` uses."""
    found: set[str] = {f"form:{program.form.value}"}
    c = program.context
    found.add(f"grad:{c.grad_mode.value}")
    found.add("mode:train" if c.training else "mode:eval")
    if c.around is not None:
        found.add("around:first")
    if c.second is not None:
        found.add(f"second:{c.second.kind.value}")
        if c.second.kind is SecondKind.STATE and c.second.around is not None and c.second.around.enabled:
            found.add("around:second")  # the second call under an enabled region of its own
        if c.second.kind is SecondKind.SHAPE and c.second.mark_dynamic:
            found.add("second:mark_dynamic")
    found.update(f"holder:{leaf.holder.value}" for leaf in program.leaves)
    if c.grad_mode is GradMode.GRAD and any(leaf.requires_grad for leaf in program.leaves):
        found.add("gradients")
    values = {s.out for s in walk(program.body) if isinstance(s, (OpCall, Mix))}

    def visit(block: Block, enclosing: Region | None, crossed: bool, depth: int) -> None:
        for s in block:
            found.update(statement_features(s, depth))
            for ref in tensor_refs(s):
                if ref.name in values:
                    found.add("feed")
                if ref.cast is not None:
                    found.add("cast")
            if isinstance(s, Region):
                found.update(region_features(s, enclosing, crossed))
                same = s.autocast.device == program.device
                boundary = s.form is RegionForm.DECORATOR
                visit(s.body, s if same or enclosing is None else enclosing, False, depth + boundary)
                if boundary:
                    found.add(f"call:depth{depth + 1}")
            elif isinstance(s, Call):
                found.add(f"call:depth{depth + 1}")
                visit(s.body, enclosing, enclosing is not None, depth + 1)
            elif isinstance(s, Escape):
                visit((s.region,), enclosing, crossed, depth)
            elif isinstance(s, Cond):
                visit(s.body, enclosing, crossed, depth)
            elif isinstance(s, CustomFunction):
                visit((s.call,), enclosing, crossed, depth)

    visit(program.body, None, False, 0)
    return frozenset(found)


def grammar_features(grammar: Grammar) -> frozenset[str]:
    """Every feature the grammar can draw on its device, with what the installed torch has."""
    g = grammar
    found = {f"form:{f.value}" for f in Form} | {f"grad:{m.value}" for m in GradMode}
    found |= {
        "mode:train",
        "mode:eval",
        "around:first",
        "around:second",
        "second:shape",
        "second:state",
        "second:mark_dynamic",
    }
    found |= {f"holder:{h.value}" for h in Holder} | {"gradients", "feed", "cast", "residual"}
    found |= {f"policy:{p}" for p in g.menu.policies} | {f"inputs:{k}" for k in ("float32", "lower", "mixed")}
    found |= {"call:entry_point", "call:aten_overload"}
    found |= {"region:any", "region:with", "region:decorator:function", "region:decorator:method"}
    found.add("region:cache_disabled")
    if any("device_type" not in e.positional for e in g.regions(g.device)):
        found.add("region:legacy")
    found |= {"nested:disabled", "nested:across_function"}
    if len(g.dtypes(g.device)) > 1:
        found.add("nested:dtype")
    if g.other_devices:
        found.add("nested:device")
    found |= {f"call:{b.value}" for b in Boundary} | {"submodule"}
    found |= {f"call:depth{d}" for d in range(1, g.limits.max_calls + 1)}
    found |= {"wrap:checkpoint"} | ({"wrap:disable"} if g.available.compiler_disable else set())
    if g.available.nested_compile_region:
        found |= {"wrap:nested_compile_region", "hop:invoke_subgraph"}
    found |= {f"break:{b.value}" for b in Break} | {f"break@{d}" for d in range(g.limits.max_calls + 1)}
    found.add("exception")
    if g.custom_function is not None:
        found |= {"custom_function:cast_inputs", "custom_function:plain"}
    if g.cache_setter is not None:
        found.add("cache_switch")
    if g.available.cond:
        found.add("hop:cond")
    if g.available.flex_attention:
        found.add("hop:flex_attention")
    return frozenset(found)

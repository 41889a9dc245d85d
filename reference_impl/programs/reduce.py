"""Reducing a program that shows something (a difference from eager) to a smaller one that still
does: :func:`reduce`.

Inside a Hypothesis test, Hypothesis shrinks a failing program itself. A campaign runs many
programs first and looks at them afterwards, so it reduces each finding here: greedily, one
simplification at a time (:func:`candidates`: a statement dropped, a region, call or branch
replaced by its body, a wrapper or a region's argument taken away, the module made a function,
the second call or the region around the call dropped), keeping a step only while the program
still shows the same thing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from .features import features
from .tree import (
    Autocast,
    Block,
    Boundary,
    CacheSwitch,
    Call,
    Cond,
    Const,
    Context,
    CustomFunction,
    Escape,
    Form,
    GradMode,
    Holder,
    OpCall,
    Program,
    Ref,
    Region,
    RegionForm,
    Seq,
    Stmt,
    Wrap,
    children,
    op_refs,
    used,
    walk,
)


def with_children(stmt: Stmt, inner: Block) -> Stmt | None:
    """``stmt`` holding ``inner`` instead of its children (None: it cannot hold them)."""
    if isinstance(stmt, (Region, Call, Cond)):
        return dataclasses.replace(stmt, body=inner)
    if isinstance(stmt, Escape):
        return Escape(inner[0]) if len(inner) == 1 and isinstance(inner[0], Region) else None
    if isinstance(stmt, CustomFunction):
        return (
            dataclasses.replace(stmt, call=inner[0])
            if len(inner) == 1 and isinstance(inner[0], OpCall)
            else None
        )
    return None


def inlined(stmt: Stmt) -> Block | None:
    """What ``stmt`` does without its wrapper: a region's, call's or branch's body, an escaped
    region without the exception, a custom Function's op called directly."""
    if isinstance(stmt, (Region, Call, Cond)):
        return stmt.body
    if isinstance(stmt, (Escape, CustomFunction)):
        return children(stmt)
    return None


def uncast(arg: object) -> object:
    if isinstance(arg, Ref):
        return dataclasses.replace(arg, cast=None)
    if isinstance(arg, Seq):
        return Seq(tuple(uncast(a) for a in arg.items))  # type: ignore[misc]
    return arg


def plainer(stmt: Stmt) -> Iterator[Stmt]:
    """``stmt`` with one of its own choices made simpler."""
    if isinstance(stmt, Region):
        a = stmt.autocast
        if a.cache_enabled is not None:
            yield dataclasses.replace(stmt, autocast=dataclasses.replace(a, cache_enabled=None))
        if not a.enabled:
            yield dataclasses.replace(stmt, autocast=dataclasses.replace(a, enabled=True))
        if stmt.form is RegionForm.DECORATOR:
            yield dataclasses.replace(stmt, form=RegionForm.WITH, name="")
        elif stmt.boundary is not Boundary.FUNCTION:
            yield dataclasses.replace(stmt, boundary=Boundary.FUNCTION)
    elif isinstance(stmt, Call):
        if stmt.wrap is not Wrap.PLAIN:
            yield dataclasses.replace(stmt, wrap=Wrap.PLAIN)
        if stmt.boundary is not Boundary.FUNCTION:
            yield dataclasses.replace(stmt, boundary=Boundary.FUNCTION)
    elif isinstance(stmt, OpCall) and any(r.cast for r in op_refs(stmt)):
        yield dataclasses.replace(
            stmt,
            args=tuple(uncast(a) for a in stmt.args),  # type: ignore[misc]
            kwargs=tuple((k, uncast(v)) for k, v in stmt.kwargs),  # type: ignore[misc]
        )


def edits(block: Block) -> Iterator[Block]:
    """Every one-step simplification of ``block``, the largest first."""
    for i, stmt in enumerate(block):
        yield block[:i] + block[i + 1 :]
        inner = inlined(stmt)
        if inner is not None:
            yield block[:i] + inner + block[i + 1 :]
    for i, stmt in enumerate(block):
        for simpler in plainer(stmt):
            yield (*block[:i], simpler, *block[i + 1 :])
        for inner in edits(children(stmt)):
            changed = with_children(stmt, inner)
            if changed is not None:
                yield (*block[:i], changed, *block[i + 1 :])


def pruned(program: Program, body: Block) -> Program:
    """``program`` with ``body``, without the leaves nothing reads any more."""
    read = {name for stmt in walk(body) for name in used(stmt)}
    leaves = tuple(leaf for leaf in program.leaves if leaf.name in read)
    return dataclasses.replace(program, body=body, leaves=leaves)


def as_function(program: Program) -> Program:
    """A module program as a function: buffers become inputs, helpers module-level functions."""

    def flat(block: Block) -> Block:
        out: list[Stmt] = []
        for s in block:
            if isinstance(s, (Call, Region)) and s.boundary is not Boundary.FUNCTION:
                s = dataclasses.replace(s, boundary=Boundary.FUNCTION)
            changed = with_children(s, flat(children(s))) if children(s) else s
            out.append(changed or s)
        return tuple(out)

    leaves = tuple(
        dataclasses.replace(x, holder=Holder.INPUT) if x.holder is Holder.BUFFER else x
        for x in program.leaves
    )
    return dataclasses.replace(program, form=Form.FUNCTION, leaves=leaves, body=flat(program.body))


def candidates(program: Program) -> Iterator[Program]:
    """The programs one simplification away from ``program``."""
    c = program.context
    if c.second is not None:
        yield dataclasses.replace(program, context=dataclasses.replace(c, second=None))
    if c.around is not None:
        yield dataclasses.replace(program, context=dataclasses.replace(c, around=None))
    for body in edits(program.body):
        yield pruned(program, body)
    if program.form is Form.MODULE:
        yield as_function(program)
    if c.grad_mode is not GradMode.NO_GRAD:
        yield dataclasses.replace(program, context=Context(GradMode.NO_GRAD, c.training, c.around, c.second))
    if c.training:
        yield dataclasses.replace(program, context=dataclasses.replace(c, training=False))
    for i, leaf in enumerate(program.leaves):
        if leaf.holder is Holder.PARAMETER or leaf.requires_grad:
            plain = dataclasses.replace(leaf, holder=Holder.INPUT, requires_grad=False)
            yield dataclasses.replace(program, leaves=(*program.leaves[:i], plain, *program.leaves[i + 1 :]))


def size(program: Program) -> tuple[int, int, int, int]:
    """How large a program is: statements, features, leaves, then its text."""
    return (
        sum(1 for _ in walk(program.body)),
        len(features(program)),
        len(program.leaves),
        len(repr(program)),
    )


def reduce(program: Program, shows: Callable[[Program], bool], budget: int = 200) -> Program:
    """The smallest program reached from ``program`` by simplifications that each keep
    ``shows(program)`` true, trying at most ``budget`` programs."""
    current, tries = program, 0
    improved = True
    while improved and tries < budget:
        improved = False
        for candidate in candidates(current):
            if size(candidate) >= size(current):
                continue
            tries += 1
            if shows(candidate):
                current, improved = candidate, True
                break
            if tries >= budget:
                break
    return current


def without_autocast(program: Program) -> Program:
    """``program`` with every autocast region disabled (``enabled=False``, the cache left as
    by default), around the calls too, and without its cache switches: what the pass does to
    the same program without autocast."""

    def off(a: Autocast) -> Autocast:
        return dataclasses.replace(a, enabled=False, cache_enabled=None)

    def around(a: Autocast | None) -> Autocast | None:
        return None if a is None else off(a)

    def block(b: Block) -> Block:
        out: list[Stmt] = []
        for s in b:
            if isinstance(s, CacheSwitch):
                continue  # autocast's too (its weight-cast cache)
            inner = children(s)
            s = (with_children(s, block(inner)) or s) if inner else s
            if isinstance(s, Region):  # an escaped region's too, as the Escape's child
                s = dataclasses.replace(s, autocast=off(s.autocast))
            out.append(s)
        return tuple(out)

    c = program.context
    second = c.second and dataclasses.replace(c.second, around=around(c.second.around))
    context = dataclasses.replace(c, around=around(c.around), second=second)
    return dataclasses.replace(program, body=block(program.body), context=context)


def in_float32(program: Program, lower: tuple[str, ...] = ("float16", "bfloat16")) -> Program:
    """``program`` with every ``lower`` dtype it names made float32: its leaves, its casts
    (``.to(<dtype>)``) and its dtype arguments; what runs without autocast where its ops mix dtypes
    that autocast would have cast to one. Its regions keep their dtype (the bare program's are
    disabled)."""
    leaves = tuple(
        dataclasses.replace(leaf, dtype="float32") if leaf.dtype in lower else leaf for leaf in program.leaves
    )
    return dataclasses.replace(program, leaves=leaves, body=_named_float32(program.body, lower))


def _named_float32(node: Any, lower: tuple[str, ...]) -> Any:
    if isinstance(node, Ref):
        return dataclasses.replace(node, cast="float32") if node.cast in lower else node
    if isinstance(node, Const):
        return Const("float32", True) if node.dtype and node.value in lower else node
    if isinstance(node, Autocast):
        return node
    if isinstance(node, tuple):
        return tuple(_named_float32(n, lower) for n in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        named = (f.name for f in dataclasses.fields(node) if f.init)
        return dataclasses.replace(node, **{n: _named_float32(getattr(node, n), lower) for n in named})
    return node

"""What a focused program must show: the context a focus draws, and whether the dimension it
focuses on changes what the program computes (:func:`shows`).

A focus (:data:`.grammar.FOCI`) makes every drawn program hold one dimension of the grammar. Held
is not enough: a legacy alias's region around an op its settings do not change, or a second call
under a state no op of the program reads, computes the same whatever a pass does with the region
or the state, and a pass that drops them passes. So a focused program of torch.compile's tests is
drawn again until the dimension is observable in it (:data:`OBSERVABLE`): some op's output dtype
depends on it. Whether it does is asked of the installed torch, eagerly, through the menu's
probes (:meth:`.menu.Menu.probe`: the op's policy as the spec's catalog gives it, with the input
dtypes the op was drawn with); no op is named here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from .draw_ops import Draw, Forms
from .grammar import Grammar
from .menu import Menu
from .tree import (
    Arg,
    Autocast,
    Call,
    Cond,
    CustomFunction,
    Escape,
    GraphBreak,
    Holder,
    OpCall,
    Program,
    Ref,
    Region,
    RegionForm,
    Second,
    SecondKind,
    Seq,
    Stmt,
    Wrap,
    children,
)

State = str | None  # the device's autocast dtype in effect (None: autocast off)
# The foci whose first call is made inside a region around it (the documented use): what they
# check is how a compiled program follows the region its caller opened.
CALLED_IN_A_REGION = ("module", "second_state", "second_shape")
# The foci drawn as an nn.Module as deployed (eval, no gradients). "frozen" is no case's focus:
# inductor's freezing pass draws it (its programs must read a Parameter that a region casts).
AS_DEPLOYED = ("module", "frozen")


def state_of(autocast: Autocast | None, device: str) -> State:
    """The autocast dtype ``autocast`` sets for ``device`` (None: off, or another device's)."""
    if autocast is None or autocast.device != device or not autocast.enabled:
        return None
    return autocast.dtype


def as_if_on(autocast: Autocast) -> State:
    """The state ``autocast`` would set on the program's device were it that device's region."""
    return autocast.dtype if autocast.enabled else None


def second_call(
    draw: Draw, g: Grammar, around: Autocast | None, kind: SecondKind | None = None, switch: bool = False
) -> Second | None:
    """The second call; with ``switch`` (the ``second_state`` focus), where the first is made in
    an enabled region, the second is made in an enabled region of another dtype where the device
    has one: the state change that only a guard on the dtype tells apart (pytorch#112260);
    unfocused programs draw on/off changes too."""
    kind = kind or draw(st.sampled_from((None, SecondKind.SHAPE, SecondKind.STATE)))
    if kind is None:
        return None
    if kind is SecondKind.SHAPE:
        return Second(kind, mark_dynamic=draw(st.booleans()))
    entry = g.regions(g.device)[0]
    takes = "device_type" in entry.positional
    options: list[Autocast | None] = [None]
    options += [Autocast(entry.name, g.device, d, True, None, takes) for d in g.dtypes(g.device)]
    options.append(Autocast(entry.name, g.device, None, False, None, takes))
    options = [o for o in options if o != around]
    on = around is not None and around.enabled
    switched = [o for o in options if o is not None and o.enabled and on] if switch else []
    return Second(kind, around=draw(st.sampled_from(switched or options)))


@dataclass(frozen=True)
class Placed:
    """One statement as the program runs it: the device's state in each call, what encloses it
    (outermost first), its place in source order, and the ``cast_inputs`` of the custom_fwd
    forward it is the body of (where that casts: autocast is off inside)."""

    stmt: Stmt
    first: State
    second: State
    within: tuple[Stmt, ...]
    order: int
    cast: str | None


def placed(program: Program) -> list[Placed]:
    """Every statement of ``program``, depth first in source order, as it runs."""
    c, device = program.context, program.device
    second = c.second.around if c.second is not None and c.second.kind is SecondKind.STATE else c.around
    out: list[Placed] = []

    def visit(
        block: tuple[Stmt, ...], s1: State, s2: State, within: tuple[Stmt, ...], cast: str | None
    ) -> None:
        for stmt in block:
            out.append(Placed(stmt, s1, s2, within, len(out), cast))
            inner = (*within, stmt)
            if isinstance(stmt, Region) and stmt.autocast.device == device:
                own = state_of(stmt.autocast, device)
                visit(stmt.body, own, own, inner, cast)
            elif isinstance(stmt, CustomFunction) and stmt.cast_inputs is not None and s1 is not None:
                visit(children(stmt), None, None, inner, stmt.cast_inputs)
            else:
                visit(children(stmt), s1, s2, inner, cast)

    visit(program.body, state_of(c.around, device), state_of(second, device), (), None)
    return out


@dataclass(frozen=True)
class Judge:
    """Whether a drawn op's output dtype changes with the state, or the inputs, it runs with."""

    menu: Menu
    forms: Forms
    dtype: str

    def dtypes(self, p: Placed, state: State, cast: str | None = None) -> tuple[str, ...] | None:
        assert isinstance(p.stmt, OpCall)
        drawn = self.forms[p.stmt.out]
        kind = {None: drawn.inputs, "float32": "float32", self.dtype: "lower"}.get(cast, drawn.inputs)
        probe = self.menu.probe(drawn.form, kind, state)
        return None if probe is None else tuple(d for _, d in probe.outputs)

    def changes(self, p: Placed, a: State, b: State) -> bool:
        """Whether the op's output dtypes under ``a`` and ``b`` differ (both run)."""
        x, y = self.dtypes(p, a), self.dtypes(p, b)
        return x is not None and y is not None and x != y


def regions(within: tuple[Stmt, ...], device: str) -> list[Region]:
    return [s for s in within if isinstance(s, Region) and s.autocast.device == device]


def shows(focus: str | None, program: Program, judge: Judge) -> bool:
    """Whether ``program`` can show the dimension ``focus`` names (see :data:`OBSERVABLE`)."""
    test = OBSERVABLE.get(focus or "")
    if test is None:
        return True
    every = placed(program)
    ops = [
        p for p in every if isinstance(p.stmt, OpCall) and p.stmt.out in judge.forms and in_a_graph(p, every)
    ]
    return any(test(program, judge, every, p) for p in ops)


def in_a_graph(p: Placed, every: list[Placed]) -> bool:
    """Whether a pass compiles ``p`` into a graph: no ``torch.compiler.disable`` helper around it,
    and no ``try`` around it that holds a graph break (Dynamo runs a frame that breaks inside a
    ``try`` eagerly, where no pass acts)."""
    if any(isinstance(s, Call) and s.wrap is Wrap.DISABLE for s in p.within):
        return False
    escapes = [s for s in p.within if isinstance(s, Escape)]
    breaks = [b for b in every if isinstance(b.stmt, GraphBreak)]
    return not any(any(s is e for s in b.within) for e in escapes for b in breaks)


def in_a_body(p: Placed) -> bool:
    """Whether ``p`` is in the body of a higher-order op (a ``torch.cond`` branch, a
    nested_compile_region), which that op calls rather than the graph around it."""
    return any(isinstance(s, Cond) or (isinstance(s, Call) and s.wrap is Wrap.NESTED) for s in p.within)


Test = Callable[[Program, Judge, list[Placed], Placed], bool]


def second_state_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """An op whose output dtype the second call's state changes."""
    return p.cast is None and judge.changes(p, p.first, p.second)


def overridden_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """An op that runs under a state of the program's own (its region: another dtype, or
    disabled) that the caller's state (the region around the call, or none) would change,
    casting it to the caller's dtype where the caller has one: what a pass must keep apart
    (AOTAutograd's runtime wrapper turns autocast off around a traced graph, whose ops a region
    around the call would otherwise cast again)."""
    caller = state_of(program.context.around, program.device)
    if p.cast is not None or p.first == caller or in_a_body(p):
        return False
    cast = judge.dtypes(p, caller)
    return cast is not None and (caller is None or caller in cast) and judge.changes(p, p.first, caller)


def refs(args: tuple[Arg, ...]) -> list[Ref]:
    """The tensors ``args`` name (in sequences too)."""
    out: list[Ref] = []
    for a in args:
        out += [a] if isinstance(a, Ref) else refs(a.items) if isinstance(a, Seq) else []
    return out


def resized_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """An op that :func:`overridden_op` names and that computes from the program's inputs only
    (no parameter or buffer): the second call's larger inputs reach it, so it runs in the graph
    compiled again for the new shapes, which must still keep its region apart from the caller's."""
    inputs = {leaf.name for leaf in program.leaves if leaf.holder is Holder.INPUT}
    made = {q.stmt.out: q.stmt for q in every if isinstance(q.stmt, OpCall)}

    def resized(op: OpCall) -> bool:
        args = refs((*op.args, *(a for _, a in op.kwargs)))
        return all(r.name in inputs or (r.name in made and resized(made[r.name])) for r in args)

    assert isinstance(p.stmt, OpCall)
    return resized(p.stmt) and overridden_op(program, judge, every, p)


def inner_region(program: Program, every: list[Placed], p: Placed) -> tuple[Region, State] | None:
    """The innermost region (of any device) around ``p``, and the state in effect where it opens."""
    rs = [s for s in p.within if isinstance(s, Region)]
    if not rs:
        return None
    at = next(q for q in every if q.stmt is rs[-1])
    return rs[-1], at.first


def legacy_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """An op directly in a legacy alias's ``with`` block whose output dtype the region changes
    (the alias called where the pass traces it; as a decorator it is the decorator focus's)."""
    found = inner_region(program, every, p)
    if found is None or p.cast is not None or found[0].autocast.takes_device:
        return False
    if found[0].form is not RegionForm.WITH:
        return False
    r, enclosing = found
    return judge.changes(p, enclosing, as_if_on(r.autocast))


def other_device_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """An op directly in a region of another device type, opened where the program's device
    has autocast on, whose output dtype that region's settings would change were they the
    device's: what a pass must not apply to the device. The region holds no graph break
    (Dynamo runs a frame whose region breaks inside a ``try`` eagerly, where no pass acts)."""
    found = inner_region(program, every, p)
    if found is None or p.cast is not None or found[0].autocast.device == program.device:
        return False
    r, enclosing = found
    traced = not any(isinstance(b.stmt, GraphBreak) and r in b.within for b in every)
    return traced and enclosing is not None and judge.changes(p, enclosing, as_if_on(r.autocast))


def cast_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """A custom_fwd forward's op whose output dtype ``cast_inputs`` changes (its inputs were
    drawn in another dtype)."""
    if p.cast is None:
        return False
    x, y = judge.dtypes(p, None, p.cast), judge.dtypes(p, None)
    return x is not None and y is not None and x != y


def resumed_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """An op after a graph break in a region of the program (the same region encloses both),
    cast by that region: the frame resumed after the break must enter the region again."""
    own = regions(p.within, program.device)
    if not own or p.cast is not None or not judge.changes(p, p.first, None):
        return False
    breaks = [b for b in every if isinstance(b.stmt, GraphBreak) and b.order < p.order]
    return any(own[-1] in b.within for b in breaks)


def subgraph_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """An op in a nested_compile_region that the state it is called under casts."""
    nested = any(isinstance(s, Call) and s.wrap is Wrap.NESTED for s in p.within)
    return nested and p.cast is None and judge.changes(p, p.first, None)


def frozen_op(program: Program, judge: Judge, every: list[Placed], p: Placed) -> bool:
    """An op that a region casts and that reads a float32 Parameter: the cast that inductor's
    freezing folds into a constant of the Parameter (the ``frozen`` focus)."""
    assert isinstance(p.stmt, OpCall)
    held = {
        leaf.name for leaf in program.leaves if leaf.holder is Holder.PARAMETER and leaf.dtype == "float32"
    }
    reads = any(r.name in held for r in refs((*p.stmt.args, *(a for _, a in p.stmt.kwargs))))
    return reads and p.cast is None and p.first is not None and judge.changes(p, p.first, None)


OBSERVABLE: dict[str, Test] = {
    "module": overridden_op,
    "second_state": second_state_op,
    "second_shape": resized_op,
    "nested": other_device_op,
    "legacy": legacy_op,
    "custom_function": cast_op,
    "break": resumed_op,
    "nested_compile_region": subgraph_op,
    "frozen": frozen_op,
}

"""Hypothesis strategies for generated autocast programs: :func:`programs`.

A program is drawn context first (function or module, grad mode, train or eval, the region around
the first call, the second call), then its body, statement by statement (:class:`Builder`). Every
choice lists its simplest option first, so Hypothesis shrinks a failing program toward a plain
function calling one op, called once under ``no_grad`` inside ``with torch.autocast(...)`` (the
documented use; a program without that region starts with a region of its own), with fewer
statements (each "one more?" is a boolean that shrinks to no), no nesting, no second call, float32
graph inputs rather than Parameters, the first policy of the device and the simplest form of its
ops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from autocast_spec.model import Spec

from ..draws import independent_of_imports
from .draw_ops import Draw, Forms, OpDrawing, Value, Where
from .foci import AS_DEPLOYED, CALLED_IN_A_REGION, Judge, second_call, shows, state_of
from .grammar import STATEMENT_FOCI, Available, Grammar, Limits
from .tree import (
    Autocast,
    Block,
    Boundary,
    Break,
    CacheSwitch,
    Call,
    Cond,
    Context,
    CustomFunction,
    Escape,
    Form,
    GradMode,
    GraphBreak,
    Holder,
    Leaf,
    Program,
    Ref,
    Region,
    RegionForm,
    SecondKind,
    Stmt,
    Wrap,
)

# Statement kinds, simplest first (Hypothesis shrinks toward the front).
KINDS: tuple[str, ...] = (
    "op",
    "mix",
    "region",
    "call",
    "break",
    "custom_function",
    "escape",
    "cache",
    "cond",
    "flex",
)
COMPUTING = frozenset({"op", "custom_function", "flex"})
GRAD_MODES = (GradMode.NO_GRAD, GradMode.GRAD, GradMode.INFERENCE)  # no backward first
RESTRICTED = ("op", "mix", "region")  # what a torch.cond branch or a nested_compile_region holds


class Builder(OpDrawing):
    """One program's body, drawn statement by statement."""

    def __init__(
        self,
        draw: Draw,
        grammar: Grammar,
        form: Form,
        context: Context,
        focus: str | None = None,
        observable: bool = False,
    ) -> None:
        self.draw, self.grammar, self.context = draw, grammar, context
        self.focus = focus if focus in STATEMENT_FOCI else None  # placed once, by :meth:`block`
        self.observable = observable  # the focus must change what the program computes
        self.menu, self.dtype, self.device = grammar.menu, grammar.dtype, grammar.device
        self.module = form is Form.MODULE
        self.resizing = context.second is not None and context.second.kind is SecondKind.SHAPE
        self.gradients = context.grad_mode is GradMode.GRAD
        self.leaves: list[Leaf] = []
        self.values: list[Value] = []
        self.forms: Forms = {}
        self.ops = 0
        self.statements = 0
        self.counts: dict[str, int] = {}

    def name(self, prefix: str) -> str:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return f"{prefix}{n}"

    @property
    def limits(self) -> Limits:
        return self.grammar.limits

    # -- blocks ------------------------------------------------------------------------

    def block(self, where: Where, first_op: bool = False, at_least: int = 1, deeper: bool = False) -> Block:
        """Statements until a "one more?" says no (or the budget ends); with ``first_op`` the
        first is an op call; with ``deeper`` (a helper's or a region's body) the first is an op
        call, a graph break, a call or a region one level deeper (so that breaks several calls
        deep and nested regions are drawn often enough)."""
        stmts: list[Stmt] = []
        while self.statements < self.limits.max_statements:
            if len(stmts) >= at_least and not self.draw(st.booleans()):
                break
            first: Callable[[Where], Stmt | None] = self.statement
            if first_op:
                first = self.op_call
            if deeper and not where.restricted and not stmts:
                kinds = ["op", "break"] + (["call"] if where.calls < self.limits.max_calls else [])
                kinds += ["region"] if where.regions < self.limits.max_regions else []
                makers: dict[str, Callable[[Where], Stmt | None]] = {
                    "op": self.op_call,
                    "break": self.graph_break,
                    "call": self.call,
                    "region": self.region,
                }
                first = makers[self.pick(kinds)]
            stmt = first(where) if not stmts else self.statement(where)
            if stmt is None:
                break
            self.statements += 1
            stmts.append(stmt)
        under_autocast = where.enclosed or self.context.around is not None
        if self.focus is not None and under_autocast and not where.restricted:
            focus, self.focus = self.focus, None  # placed once: not again in the blocks it draws
            focused = self.focused(focus, where)
            stmts += [focused] if focused is not None else []
            if focus == "break" and self.observable and self.ops < self.limits.max_ops:  # after the resume
                stmts += [s for s in (self.op_call(where),) if s is not None]
        return tuple(stmts)

    def nested(self, where: Where) -> Region:
        """A region nested in one of the program's own (outside any, a region holding one)."""
        if not where.enclosed:
            self.focus = "nested"  # placed again in the region's own block
        return self.region(where)

    def focused(self, focus: str, where: Where) -> Stmt | None:
        """One statement of the focus's kind (None where the grammar has none here)."""
        makers: dict[str, Callable[[], Stmt | None]] = {
            "decorator": lambda: self.region(where, RegionForm.DECORATOR),
            "legacy": lambda: self.region(where, legacy=True),
            "nested": lambda: self.nested(where),
            "helpers": lambda: self.call(where, Wrap.PLAIN),
            "break": lambda: self.graph_break(where),
            "escape": lambda: Escape(self.region(where, RegionForm.WITH)),
            "custom_function": lambda: self.custom_function(where) if self.grammar.custom_function else None,
            "checkpoint": lambda: self.call(where, Wrap.CHECKPOINT),
            "cache": lambda: (
                CacheSwitch(self.grammar.cache_setter or "", self.draw(st.booleans()))
                if self.grammar.cache_setter
                else None
            ),
            "cond": lambda: self.cond(where) if self.grammar.available.cond else None,
            "flex": lambda: self.flex() if self.grammar.available.flex_attention else None,
            "nested_compile_region": lambda: (
                self.call(where, Wrap.NESTED) if self.grammar.available.nested_compile_region else None
            ),
        }
        return makers[focus]()

    def kinds(self, where: Where) -> list[str]:
        ok = []
        avail: Available = self.grammar.available
        for kind in RESTRICTED if where.restricted else KINDS:
            if kind in COMPUTING and self.ops >= self.limits.max_ops:
                continue
            if kind == "mix" and not self.values:
                continue
            if kind in ("region", "escape") and where.regions >= self.limits.max_regions:
                continue
            if kind == "call" and where.calls >= self.limits.max_calls:
                continue
            if kind == "custom_function" and self.grammar.custom_function is None:
                continue
            if kind == "cache" and self.grammar.cache_setter is None:
                continue
            if (kind == "cond" and not avail.cond) or (kind == "flex" and not avail.flex_attention):
                continue
            ok.append(kind)
        return ok

    def statement(self, where: Where) -> Stmt | None:
        kind = self.pick(self.kinds(where))
        if kind == "op":
            return self.op_call(where)
        if kind == "mix":
            return self.mix(where)
        if kind == "region":
            return self.region(where)
        if kind == "call":
            return self.call(where)
        if kind == "break":
            return self.graph_break(where)
        if kind == "custom_function":
            return self.custom_function(where)
        if kind == "escape":
            return Escape(self.region(where, RegionForm.WITH))
        if kind == "cache":
            return CacheSwitch(self.grammar.cache_setter or "", self.draw(st.booleans()))
        if kind == "cond":
            return self.cond(where)
        return self.flex()

    # -- regions -----------------------------------------------------------------------

    def autocast(self, device: str, dtypes: bool = True, legacy: bool = False) -> Autocast:
        entries = self.grammar.regions(device)
        if legacy:  # the device's legacy alias (it takes no device_type), where it has one
            entries = tuple(e for e in entries if "device_type" not in e.positional) or entries
        entry = self.pick(entries)
        return Autocast(
            entry.name,
            device,
            self.pick(self.grammar.dtypes(device)) if dtypes else None,
            enabled=self.pick((True, False)),
            cache_enabled=self.pick((None, False)),
            takes_device="device_type" in entry.positional,
        )

    def region(self, where: Where, form: RegionForm | None = None, legacy: bool = False) -> Region:
        device = self.device
        others = self.grammar.other_devices
        if where.regions and others and not legacy and self.draw(st.booleans()):
            device = self.pick(others)  # a region of another device type, nested
        autocast = self.autocast(device, legacy=legacy)
        forms = (
            (RegionForm.WITH, RegionForm.DECORATOR)
            if where.calls < self.limits.max_calls
            else (RegionForm.WITH,)
        )
        form = form or self.pick(forms)
        boundary = Boundary.FUNCTION
        if form is RegionForm.DECORATOR and where.has_self:
            boundary = self.pick((Boundary.FUNCTION, Boundary.METHOD))
        inner = dataclasses.replace(where, regions=where.regions + 1)
        if form is RegionForm.DECORATOR:
            inner = dataclasses.replace(inner, calls=where.calls + 1, has_self=boundary is Boundary.METHOD)
        if device == self.device:
            inner = dataclasses.replace(inner, states=(state_of(autocast, device),), enclosed=True)
        name = self.name("r") if form is RegionForm.DECORATOR else ""
        return Region(autocast, form, self.block(inner, first_op=True, deeper=True), name, boundary)

    # -- helpers, graph breaks, exceptions ------------------------------------------------

    def call(self, where: Where, wrap: Wrap | None = None) -> Call:
        boundaries = [Boundary.FUNCTION] + ([Boundary.METHOD, Boundary.SUBMODULE] if where.has_self else [])
        boundary = self.pick(boundaries)
        avail = self.grammar.available
        wraps = [Wrap.PLAIN, Wrap.CHECKPOINT]
        wraps += [Wrap.DISABLE] if avail.compiler_disable else []
        wraps += [Wrap.NESTED] if avail.nested_compile_region and not where.restricted else []
        wrap = wrap or self.pick(wraps)
        inner = dataclasses.replace(where, calls=where.calls + 1, has_self=boundary is not Boundary.FUNCTION)
        if wrap is Wrap.NESTED:
            inner = dataclasses.replace(inner, restricted=True, tensors_only=True)
        name = self.name("Sub" if boundary is Boundary.SUBMODULE else "h")
        return Call(name, boundary, wrap, self.block(inner, first_op=True, deeper=True))

    def graph_break(self, where: Where) -> GraphBreak:
        kind = self.pick(tuple(Break))
        if kind is Break.ITEM:
            tensors = [v.ref for v in self.values] + [Ref(x.name) for x in self.leaves if x.floating]
            if not tensors:
                return GraphBreak(Break.PRINT)
            return GraphBreak(kind, self.pick(tensors))
        return GraphBreak(kind)

    def custom_function(self, where: Where) -> CustomFunction | None:
        pair = self.grammar.custom_function
        assert pair is not None
        cast = self.pick((None, "float32", self.dtype))
        inner = dataclasses.replace(where, cast_inputs=cast, tensors_only=True)
        op = self.op_call(inner)
        if op is None:
            return None
        return CustomFunction(self.name("Fn"), op, pair[0], pair[1], self.device, cast)

    def cond(self, where: Where) -> Cond:
        pred = Leaf(self.name("x"), (), "float32", "normal", Holder.INPUT, False, len(self.leaves))
        self.leaves.append(pred)
        inner = dataclasses.replace(where, restricted=True, tensors_only=True, has_self=False)
        return Cond(self.name("c"), Ref(pred.name), self.block(inner, first_op=True))

    # -- the program ---------------------------------------------------------------------

    def body(self) -> Block:
        """The top-level statements: without a region around the call, the first is a region
        of the program's own (an autocast program)."""
        c = self.context
        second = c.second.around if c.second is not None else None
        outside = tuple(dict.fromkeys((state_of(c.around, self.device), state_of(second, self.device))))
        states = outside if c.second and c.second.kind is SecondKind.STATE else outside[:1]
        where = Where(states, False, has_self=self.module)
        first: Block = ()
        if c.around is None:
            first = (self.region(where),)
            self.statements += 1
        return first + self.block(where, at_least=0 if first else 1)


@st.composite
def program_strategy(
    draw: Draw,
    grammar: Grammar,
    focus: str | None = None,
    inference_only: bool = False,
    observable: bool = False,
) -> Program | None:
    form = Form.MODULE if focus in AS_DEPLOYED else draw(st.sampled_from(tuple(Form)))
    shown = focus if observable else None  # the focus whose dimension the program must show
    inference_only = inference_only or shown in AS_DEPLOYED  # eval, no gradients
    modes = (GradMode.NO_GRAD, GradMode.INFERENCE) if inference_only else GRAD_MODES
    grad_mode = GradMode.GRAD if focus == "train" else draw(st.sampled_from(modes))
    training = focus == "train" or (not inference_only and draw(st.booleans()))
    around = None
    if shown in CALLED_IN_A_REGION or draw(st.booleans()):
        entry = grammar.regions(grammar.device)[0]
        around = Autocast(
            entry.name,
            grammar.device,
            draw(st.sampled_from(grammar.dtypes(grammar.device))),
            takes_device="device_type" in entry.positional,
        )
    kind = {"second_shape": SecondKind.SHAPE, "second_state": SecondKind.STATE}.get(focus or "")
    second = second_call(draw, grammar, around, kind, switch=shown == "second_state")
    context = Context(grad_mode, training, around, second)
    builder = Builder(draw, grammar, form, context, focus, observable)
    body = builder.body()
    program = Program(grammar.device, grammar.dtype, form, tuple(builder.leaves), body, context)
    # None: drawn again (a filter, not assume(): an exception makes Hypothesis describe the strategy)
    return program if shows(shown, program, Judge(grammar.menu, builder.forms, grammar.dtype)) else None


def programs(
    spec: Spec,
    device: str = "cpu",
    dtype: str | None = None,
    *,
    limits: Limits | None = None,
    available: Available | None = None,
    focus: str | None = None,
    inference_only: bool = False,
    observable: bool = False,
) -> st.SearchStrategy[Program]:
    """Autocast programs on ``device`` under autocast to ``dtype`` (default: the device's
    default dtype), drawn from the spec (ops, policies, entry points) and what the installed
    torch has (``available``: the higher-order ops; default: detected). ``focus`` (one of
    :data:`FOCI`, or ``"frozen"``: a module reading a Parameter that a region casts): every
    program holds that dimension; with ``observable``, in a way that changes what it computes
    (:mod:`.foci`); ``inference_only``: eval mode, under ``no_grad`` or
    ``inference_mode`` (what inductor's freezing takes)."""
    dtype = dtype or spec.device(device).default_dtype
    grammar = Grammar(spec, device, dtype, limits or Limits(), available or Available.installed())
    drawn = program_strategy(grammar, focus, inference_only, observable)
    return drawn.filter(lambda p: p is not None)  # type: ignore[return-value]


def drawn_programs(
    spec: Spec,
    n: int,
    at: int,
    device: str = "cpu",
    dtype: str | None = None,
    *,
    inference_only: bool = False,
) -> list[Program]:
    """The first ``n`` programs the strategy draws from seed ``at`` (generation only, no
    database): the same list on every run and in any process, for campaigns and benchmarks
    (``inference_only``: as :func:`programs`, for a pass that takes no other)."""
    out: list[Program] = []

    @seed(at)
    @settings(
        max_examples=n,
        phases=[Phase.generate],
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(programs(spec, device, dtype, inference_only=inference_only))
    def collect(p: Program) -> None:
        out.append(p)

    with independent_of_imports():
        collect()
    return out

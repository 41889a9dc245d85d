"""Drawing the statements that compute: op calls, residual adds, flex_attention, and their
tensors (new leaves, or earlier values fed in).

An op call is drawn policy first (each of the device's policies, then ``unlisted``, equally
likely), then one of its forms, then the dtypes of its floating inputs (float32, the autocast
dtype, or mixed) among those the menu's probes show it runs with wherever the call may run.
Each tensor is a new leaf (a graph input, a Parameter or a buffer) or, where shapes match, an
earlier value or leaf: ops feed each other. A value fed to an op that autocast does not cast
there is cast to the dtype the slot was drawn with (``.to()``); one autocast casts may go in
as it is, so a lower-precision output can meet a float32 tensor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from hypothesis import strategies as st

from autocast_spec.catalog import Arg as SampleArg
from autocast_spec.catalog import DtypeArg, ListArg, TensorArg

from ..engine.dtypes import dtype_of
from .menu import UNLISTED, Menu, OpForm, Probe, scaled, slot_dtypes
from .tree import Arg, Const, FlexAttention, Holder, Leaf, Mix, OpCall, Ref, Seq

T = TypeVar("T")
Draw = Callable[[st.SearchStrategy[Any]], Any]
FLEX_SHAPE = (1, 2, 16, 8)  # (batch, heads, sequence, head dim) of flex_attention's q, k, v
CASTING = frozenset({"lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype", "promote"})


@dataclass(frozen=True)
class Value:
    """A tensor later statements may take: an op's (floating) result, or a leaf."""

    ref: Ref
    shape: tuple[int, ...]
    dtype: str
    resized: tuple[int, ...] | None  # its shape in the second call with larger inputs
    fixed: bool = False  # a leaf that keeps its shape in that call (a module's Parameter or buffer)


@dataclass(frozen=True)
class Drawn:
    """How an op call was drawn: its form and its input kind."""

    form: OpForm
    inputs: str


Forms = dict[str, Drawn]  # an op call's value name -> how it was drawn


@dataclass(frozen=True)
class Where:
    """Where a statement is drawn: the autocast dtypes the device may run it under (None: off;
    several where the region around the call decides), how deep it is, what it may hold."""

    states: tuple[str | None, ...]
    enclosed: bool  # inside one of the program's own regions for the device
    calls: int = 0
    regions: int = 0
    restricted: bool = False  # a torch.cond branch or nested_compile_region: no graph breaks etc.
    tensors_only: bool = False  # ops whose results are new tensors only (torch.cond, a custom Function)
    cast_inputs: str | None = None  # inside a custom_fwd(cast_inputs=...) forward
    has_self: bool = False  # in a module's forward or method (a method or submodule may be called)


def promoted(a: str, b: str) -> str:
    return str(torch.promote_types(dtype_of(a), dtype_of(b))).removeprefix("torch.")


class OpDrawing:
    """The computing statements of :class:`.strategies.Builder` (which holds the counters)."""

    draw: Draw
    menu: Menu
    dtype: str
    module: bool  # a module program (Parameters and buffers live in modules)
    resizing: bool  # the program has a second call with larger inputs
    gradients: bool  # the program takes gradients
    leaves: list[Leaf]
    values: list[Value]
    forms: Forms  # every op call drawn
    ops: int

    def name(self, prefix: str) -> str:
        raise NotImplementedError

    def pick(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))

    # -- leaves -----------------------------------------------------------------------

    def holder(self, arg: TensorArg, floating: bool) -> Holder:
        holders = [Holder.INPUT]
        if floating and not arg.constant:
            holders.append(Holder.PARAMETER)
        if self.module:
            holders.append(Holder.BUFFER)
        return self.pick(holders)

    def new_leaf(self, arg: TensorArg, dtype: str, holder: Holder, grad_allowed: bool = True) -> Leaf:
        floating = dtype.startswith(("float", "bfloat"))
        prefix = {Holder.INPUT: "x", Holder.PARAMETER: "w", Holder.BUFFER: "b"}[holder]
        grad = holder is Holder.PARAMETER or (
            holder is Holder.INPUT
            and floating
            and grad_allowed
            and self.gradients
            and self.draw(st.booleans())
        )
        leaf = Leaf(self.name(prefix), arg.shape, dtype, arg.domain, holder, grad, len(self.leaves))
        self.leaves.append(leaf)
        return leaf

    def fixed(self, leaf: Leaf) -> bool:
        return self.module and leaf.holder is not Holder.INPUT

    def leaf_value(self, leaf: Leaf) -> Value:
        fixed = self.fixed(leaf)
        resized = (leaf.shape if fixed else scaled(leaf.shape)) if self.resizing else None
        return Value(Ref(leaf.name), leaf.shape, leaf.dtype, resized, fixed)

    # -- one tensor argument -----------------------------------------------------------

    def sources(self, arg: TensorArg, dtype: str) -> list[Value]:
        """Earlier values and leaves that may stand in a slot of ``arg`` drawn as ``dtype``."""
        if not arg.is_test_float or arg.domain != "normal":
            return []
        leaves = [self.leaf_value(x) for x in self.leaves if x.domain == "normal" and x.dtype == dtype]
        found = [v for v in (*self.values, *leaves) if v.shape == arg.shape]
        if self.resizing:  # in the larger call, the slot's tensor grows with the inputs
            found = [v for v in found if v.fixed or v.resized == scaled(arg.shape)]
        return found

    def argument(self, arg: TensorArg, dtype: str, casts: bool) -> tuple[Ref, bool]:
        """A tensor for ``arg`` drawn as ``dtype``: an earlier value (cast where autocast does not
        cast it, ``casts`` False) or a new leaf; and whether it keeps its shape in the larger call."""
        found = self.sources(arg, dtype)
        if found and self.draw(st.booleans()):
            v = self.pick(found)
            keep = v.dtype == dtype or (
                casts and v.dtype in ("float32", self.dtype) and self.draw(st.booleans())
            )
            return Ref(v.ref.name, v.ref.index, None if keep else dtype), v.fixed
        leaf = self.new_leaf(arg, dtype, self.holder(arg, dtype.startswith(("float", "bfloat"))))
        return Ref(leaf.name), self.fixed(leaf)

    # -- an op call --------------------------------------------------------------------

    def runs(self, form: OpForm, inputs: str, where: Where) -> Probe | None:
        """What ``form`` gives with ``inputs`` wherever ``where`` may run it (None: it raises in
        one of them); the first state's result."""
        kind = {None: inputs, "float32": "float32", self.dtype: "lower"}.get(where.cast_inputs)
        probes = []
        for state in where.states:
            if where.cast_inputs is not None and state is not None and kind is not None:
                probes.append(self.menu.probe(form, kind, None))  # custom_fwd casts, autocast off
            else:
                probes.append(self.menu.probe(form, inputs, state))
        return None if any(p is None for p in probes) else probes[0]

    def usable(self, form: OpForm, where: Where) -> list[str]:
        """The input kinds ``form`` runs with here, given what the program needs of it."""
        if self.gradients and not form.differentiable:
            return []
        if self.resizing and self.menu.resized(form, frozenset()) is None:
            return []
        kinds = []
        for inputs in ("float32", "lower", "mixed"):
            probe = self.runs(form, inputs, where)
            whole = probe is not None and probe.tensors_only and probe.fresh and probe.dense_real
            if probe is not None and (whole or not where.tensors_only):
                kinds.append(inputs)
        return kinds

    def op_call(self, where: Where) -> OpCall | None:
        """A catalogued op's call (None: no form of the drawn policy runs here)."""
        policy = self.pick(self.menu.policies)
        forms = self.menu.by_policy[policy]
        start = self.draw(st.integers(0, len(forms) - 1))
        for form in (*forms[start:], *forms[:start]):  # the first that runs here, from the drawn one
            kinds = self.usable(form, where)
            if kinds:
                return self.call_form(form, self.pick(kinds), where)
        return None

    def call_form(self, form: OpForm, inputs: str, where: Where) -> OpCall:
        dtypes = slot_dtypes(form, inputs, self.dtype)
        active = all(s is not None for s in where.states) and where.cast_inputs is None
        casts = form.policy in CASTING and form.policy != UNLISTED and active
        refs: list[Ref] = []
        fixed: set[int] = set()
        for i, (arg, dtype) in enumerate(zip(form.slots(), dtypes, strict=True)):
            ref, keeps = self.argument(arg, dtype, casts)
            refs.append(ref)
            if keeps:
                fixed.add(i)
        out = self.name("v")
        args, kwargs = with_refs(form, refs)
        self.ops += 1
        self.forms[out] = Drawn(form, inputs)
        self.remember(out, form, inputs, where, frozenset(fixed))
        return OpCall(out, form.op, form.entry, args, kwargs, form.policy, inputs)

    def remember(self, out: str, form: OpForm, inputs: str, where: Where, fixed: frozenset[int]) -> None:
        """Make the op's first floating result a value later statements may take."""
        probe = self.runs(form, inputs, where)
        if probe is None or probe.primary is None:
            return
        i = probe.primary
        shape, dtype = probe.outputs[i]
        resized = None
        if self.resizing:
            grown = self.menu.resized(form, fixed)
            resized = grown.outputs[i][0] if grown is not None and len(grown.outputs) > i else None
        index = None if len(probe.outputs) == 1 and probe.tensors_only else i
        self.values.append(Value(Ref(out, index), shape, dtype, resized))

    # -- a residual add, flex_attention --------------------------------------------------

    def mix(self, where: Where) -> Mix | None:
        """``out = a + b``: an earlier value plus a new float32 (or lower) tensor of its shape, or
        plus another earlier value of its shape."""
        if not self.values:
            return None
        a = self.pick(self.values)
        others = [v for v in self.values if v.shape == a.shape and v.resized == a.resized and v != a]
        if others and self.draw(st.booleans()):
            b = self.pick(others)
        else:
            dtype = self.pick(("float32", self.dtype))
            arg = TensorArg(a.shape)
            holder = Holder.INPUT if self.resizing and not a.fixed else self.holder(arg, True)
            leaf = self.new_leaf(arg, dtype, holder)
            b = self.leaf_value(leaf)
            if b.resized != a.resized:  # a Parameter beside a growing value: make it an input
                self.leaves[-1] = leaf = dataclasses.replace(leaf, holder=Holder.INPUT)
                b = self.leaf_value(leaf)
        out = self.name("v")
        left, dtype = a.ref, a.dtype
        if a.dtype in ("float32", self.dtype) and self.draw(st.booleans()):  # x.float() + residual
            dtype = self.dtype if a.dtype == "float32" else "float32"
            left = dataclasses.replace(a.ref, cast=dtype)
        self.values.append(Value(Ref(out), a.shape, promoted(dtype, b.dtype), a.resized, a.fixed and b.fixed))
        return Mix(out, left, b.ref)

    def flex(self) -> FlexAttention:
        dtype = self.pick(("float32", self.dtype))
        # inputs that never require grad: flex_attention has no backward on every device (cpu)
        q, k, v = (Ref(self.new_leaf(TensorArg(FLEX_SHAPE), dtype, Holder.INPUT, False).name) for _ in "qkv")
        self.ops += 1
        return FlexAttention(self.name("v"), q, k, v, score_mod=self.draw(st.booleans()))


def with_refs(form: OpForm, refs: list[Ref]) -> tuple[tuple[Arg, ...], tuple[tuple[str, Arg], ...]]:
    """The form's sample with its tensors replaced by ``refs``, in order."""
    it = iter(refs)

    def convert(arg: SampleArg) -> Arg:
        if isinstance(arg, TensorArg):
            return next(it)
        if isinstance(arg, ListArg):
            return Seq(tuple(convert(a) for a in arg.items))
        if isinstance(arg, DtypeArg):
            return Const(arg.name, dtype=True)
        return Const(arg.value)

    args = tuple(convert(a) for a in form.sample.args)
    return args, tuple((k, convert(v)) for k, v in form.sample.kwargs.items())

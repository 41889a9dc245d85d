"""The program tree: what a generated autocast program is, as frozen data.

A :class:`Program` is a plain function or an ``nn.Module`` (:class:`Form`) whose body is a
:data:`Block` of statements. Its tensors are :class:`Leaf` objects (graph inputs, Parameters
or buffers, each built from a seed); every op call binds its result to a value name (``v0``,
``v1``...) that later statements may take as an argument (:class:`Ref`), so ops feed each other.
Every value the program computes is one of its outputs, in the order computed.

Nothing here names an op, a policy or an autocast entry point of its own: the strategies
(:mod:`.strategies`) fill them in from the spec, and the renderer (:mod:`.render`) writes them
out as they are held here. The tree is immutable and hashable, so a program is its own key.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Union


class Form(str, enum.Enum):
    FUNCTION = "function"  # def program(x0, x1, ...)
    MODULE = "module"  # class Program(nn.Module), its forward the body


class Holder(str, enum.Enum):
    INPUT = "input"  # a graph input (an argument of the call)
    PARAMETER = "parameter"  # an nn.Parameter of the module that uses it
    BUFFER = "buffer"  # a registered buffer


class GradMode(str, enum.Enum):
    GRAD = "grad"  # grad enabled: gradients are taken when something requires them
    NO_GRAD = "no_grad"
    INFERENCE = "inference_mode"


class RegionForm(str, enum.Enum):
    WITH = "with"
    DECORATOR = "decorator"  # on a helper function or method (its :class:`Boundary`)


class Boundary(str, enum.Enum):
    """How a helper is defined and called."""

    FUNCTION = "function"  # a module-level function
    METHOD = "method"  # a method of the module class using it (module programs only)
    SUBMODULE = "submodule"  # the forward of a child nn.Module (module programs only)


class Wrap(str, enum.Enum):
    """What a helper call goes through."""

    PLAIN = "plain"
    CHECKPOINT = "checkpoint"  # torch.utils.checkpoint.checkpoint(helper, ..., use_reentrant=False)
    DISABLE = "disable"  # torch.compiler.disable: a call Dynamo does not trace (a graph break)
    NESTED = "nested_compile_region"  # torch.compiler.nested_compile_region (invoke_subgraph), called twice


class Break(str, enum.Enum):
    GRAPH_BREAK = "graph_break"  # torch._dynamo.graph_break()
    PRINT = "print"
    ITEM = "item"  # a tensor's .item()


class SecondKind(str, enum.Enum):
    SHAPE = "shape"  # the graph inputs twice as large in every dimension
    STATE = "state"  # the same inputs under another autocast state around the call


# ---------------------------------------------------------------------------
# Data: leaves and arguments
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    """A tensor of the program's data, built from ``seed`` by the rendered ``make_tensor``."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # a dtype name: float32, the autocast dtype, or a sample's fixed dtype
    domain: str  # the catalog's value domain (normal, positive, spd, index:N...)
    holder: Holder
    requires_grad: bool
    seed: int

    @property
    def floating(self) -> bool:
        return self.dtype.startswith(("float", "bfloat"))


@dataclass(frozen=True)
class Ref:
    """A tensor argument: a leaf or an earlier value (``index``: its tuple element), optionally
    cast with ``.to(<cast>)``."""

    name: str
    index: int | None = None
    cast: str | None = None


@dataclass(frozen=True)
class Const:
    """A literal argument (int, float, bool, str, None), or a dtype (``dtype`` True: ``value``
    is a dtype name written ``torch.<value>``)."""

    value: object
    dtype: bool = False


@dataclass(frozen=True)
class Seq:
    items: tuple[Arg, ...]


Arg = Union[Ref, Const, Seq]  # noqa: UP007 (a runtime alias)


# ---------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OpCall:
    """``out = <entry>(*args, **kwargs)``: a catalogued op through one of its entry points
    (or the aten overload itself, when ``entry`` is the op's name)."""

    out: str
    op: str
    entry: str
    args: tuple[Arg, ...]
    kwargs: tuple[tuple[str, Arg], ...]
    policy: str  # the device's policy for the op, or "unlisted" (for reports and coverage)
    inputs: str  # float32 | lower | mixed: the dtypes its floating leaves were drawn with


@dataclass(frozen=True)
class Mix:
    """``out = a + b``: a residual add (a lower-precision value meeting a float32 one)."""

    out: str
    a: Ref
    b: Ref


@dataclass(frozen=True)
class Autocast:
    """One autocast region's constructor: the spec's entry point and its arguments."""

    entry: str
    device: str
    dtype: str | None  # None: the device's default
    enabled: bool = True
    cache_enabled: bool | None = None
    takes_device: bool = True  # False: a legacy alias bound to its device (torch.cpu.amp.autocast)


@dataclass(frozen=True)
class Region:
    """An autocast region around ``body``: a ``with`` block, or a decorated helper (``name``)."""

    autocast: Autocast
    form: RegionForm
    body: Block
    name: str = ""  # the decorated helper's name
    boundary: Boundary = Boundary.FUNCTION  # the decorated helper's kind


@dataclass(frozen=True)
class Call:
    """A call of the helper ``name`` whose body is ``body``."""

    name: str
    boundary: Boundary
    wrap: Wrap
    body: Block


@dataclass(frozen=True)
class GraphBreak:
    kind: Break
    ref: Ref | None = None  # the tensor an ``.item()`` reads


@dataclass(frozen=True)
class Escape:
    """``try: with <region>: ...; raise Escaped`` ``except Escaped: pass``: an exception raised
    inside a region and caught outside it."""

    region: Region


@dataclass(frozen=True)
class CustomFunction:
    """A custom ``torch.autograd.Function`` (``name``) whose forward is ``call``, its forward
    decorated with ``fwd`` (``cast_inputs``: a dtype name, or None) and its backward with ``bwd``
    (a recomputation of the op's gradient)."""

    name: str
    call: OpCall
    fwd: str
    bwd: str
    device: str
    cast_inputs: str | None


@dataclass(frozen=True)
class CacheSwitch:
    """``<setter>(enabled)``: autocast's weight-cast cache switched (the spec's cache setter)."""

    setter: str
    enabled: bool


@dataclass(frozen=True)
class Cond:
    """``torch.cond(pred > 0, true_fn, false_fn, operands)``: the true branch runs ``body``, the
    false branch the same and returns zeros of its results (the same metadata)."""

    name: str
    pred: Ref
    body: Block


@dataclass(frozen=True)
class FlexAttention:
    """``out = flex_attention(q, k, v[, score_mod])``."""

    out: str
    q: Ref
    k: Ref
    v: Ref
    score_mod: bool


Stmt = Union[  # noqa: UP007 (a runtime alias)
    OpCall, Mix, Region, Call, GraphBreak, Escape, CustomFunction, CacheSwitch, Cond, FlexAttention
]
Block = tuple[Stmt, ...]


# ---------------------------------------------------------------------------
# The call context, and the program
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Second:
    """A second call of the same (compiled) program: with larger inputs (``SHAPE``; with
    ``mark_dynamic``, their first dimension marked dynamic before the first call), or under
    another autocast state around it (``STATE``: ``around``, None for no region)."""

    kind: SecondKind
    around: Autocast | None = None
    mark_dynamic: bool = False


@dataclass(frozen=True)
class Context:
    grad_mode: GradMode
    training: bool  # module.train() (True) or .eval(); a function: whether its leaves need grad
    around: Autocast | None = None  # the region the first call is made in (None: none)
    second: Second | None = None


@dataclass(frozen=True)
class Program:
    device: str
    dtype: str  # the autocast dtype under test (a "lower" input's dtype)
    form: Form
    leaves: tuple[Leaf, ...]
    body: Block
    context: Context

    @property
    def id(self) -> str:
        """A short stable name: a digest of the whole tree."""
        return "p" + hashlib.sha1(repr(self).encode()).hexdigest()[:10]

    def leaf(self, name: str) -> Leaf | None:
        return next((leaf for leaf in self.leaves if leaf.name == name), None)

    @property
    def inputs(self) -> tuple[Leaf, ...]:
        return tuple(leaf for leaf in self.leaves if leaf.holder is Holder.INPUT)


# ---------------------------------------------------------------------------
# Walking a tree
# ---------------------------------------------------------------------------


def children(stmt: Stmt) -> Block:
    """The statements directly inside ``stmt`` (a custom Function's forward call included)."""
    if isinstance(stmt, (Region, Call, Cond)):
        return stmt.body
    if isinstance(stmt, Escape):
        return (stmt.region,)
    if isinstance(stmt, CustomFunction):
        return (stmt.call,)
    return ()


def walk(block: Block) -> Iterator[Stmt]:
    """Every statement of ``block``, depth first, in source order."""
    for stmt in block:
        yield stmt
        yield from walk(children(stmt))


def defined(stmt: Stmt) -> tuple[str, ...]:
    """The value names ``stmt`` binds in the scope it appears in (its nested statements' too)."""
    if isinstance(stmt, (OpCall, Mix, FlexAttention)):
        return (stmt.out,)
    if isinstance(stmt, CustomFunction):
        return (stmt.call.out,)
    return tuple(name for inner in children(stmt) for name in defined(inner))


def refs(arg: Arg) -> Iterator[Ref]:
    if isinstance(arg, Ref):
        yield arg
    elif isinstance(arg, Seq):
        for item in arg.items:
            yield from refs(item)


def op_refs(call: OpCall) -> Iterator[Ref]:
    """The tensor arguments of an op call, in order."""
    for arg in (*call.args, *(v for _, v in call.kwargs)):
        yield from refs(arg)


def used(stmt: Stmt) -> tuple[str, ...]:
    """The names ``stmt`` and its nested statements read (leaves and values), in order."""
    found: list[Ref] = []
    if isinstance(stmt, OpCall):
        found.extend(op_refs(stmt))
    elif isinstance(stmt, Mix):
        found += [stmt.a, stmt.b]
    elif isinstance(stmt, GraphBreak) and stmt.ref is not None:
        found.append(stmt.ref)
    elif isinstance(stmt, Cond):
        found.append(stmt.pred)
    elif isinstance(stmt, FlexAttention):
        found += [stmt.q, stmt.k, stmt.v]
    names = [r.name for r in found]
    for inner in children(stmt):
        names.extend(used(inner))
    return tuple(dict.fromkeys(names))


def free_names(block: Block) -> tuple[str, ...]:
    """The names ``block`` reads that it does not bind itself, in first-use order (value names
    are bound once in a program, so a name bound anywhere in ``block`` is its own)."""
    bound = {name for stmt in walk(block) for name in defined(stmt)}
    return tuple(dict.fromkeys(n for stmt in block for n in used(stmt) if n not in bound))


def values(block: Block) -> tuple[str, ...]:
    """Every value name ``block`` binds, in order: the program's outputs."""
    return tuple(name for stmt in block for name in defined(stmt))

"""A program tree as Python source: its functions, classes and modules (:func:`program_source`).

Helpers become module-level functions, methods of the module class that calls them, or child
``nn.Module`` classes; a decorated region becomes a decorated helper; a custom Function a class
of its own; a ``torch.cond`` two nested branch functions. A helper takes the tensors it reads
that its scope does not hold (``self.<name>`` in a module that owns the leaf) and returns every
value it computes, which its caller unpacks: every value stays an output of the program.

A module program's Parameter or buffer belongs to the innermost module whose code uses it all
(the root ``Program`` otherwise) and is built in its ``__init__`` from the leaf's seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .tree import (
    Arg,
    Autocast,
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
    GraphBreak,
    Holder,
    Leaf,
    Mix,
    OpCall,
    Program,
    Ref,
    Region,
    RegionForm,
    Seq,
    Stmt,
    Wrap,
    children,
    free_names,
    op_refs,
    values,
)

ROOT = "Program"
Path = tuple[str, ...]  # the submodules from the root module down to a module


def literal(value: object) -> str:
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return f"float({str(value)!r})"
    return repr(value)


def autocast_text(a: Autocast) -> str:
    """The region's constructor call, with the arguments it was drawn with."""
    parts = [repr(a.device)] if a.takes_device else []
    if a.dtype is not None:
        parts.append(f"dtype=torch.{a.dtype}")
    if not a.enabled:
        parts.append("enabled=False")
    if a.cache_enabled is not None:
        parts.append(f"cache_enabled={a.cache_enabled}")
    return f"{a.entry}({', '.join(parts)})"


def callee(entry: str) -> str:
    """``aten::add.Tensor`` -> ``torch.ops.aten.add.Tensor``; an entry point as it is named."""
    if "::" not in entry:
        return entry
    ns, rest = entry.split("::", 1)
    name, _, overload = rest.partition(".")
    return f"torch.ops.{ns}.{name}.{overload or 'default'}"


def tuple_text(names: tuple[str, ...]) -> str:
    return "(" + "".join(f"{n}, " for n in names).rstrip(" ") + ")" if names else "()"


@dataclass
class ModuleClass:
    name: str
    leaves: list[Leaf] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Scope:
    module: Path | None  # the module ``self`` is (None: no ``self`` here)


class Renderer:
    def __init__(self, program: Program) -> None:
        self.program = program
        self.functions: list[str] = []
        self.classes: dict[Path, ModuleClass] = {(): ModuleClass(ROOT)}
        self.owner: dict[str, Path] = {}
        self.escapes = False
        self.flex = False
        if program.form is Form.MODULE:
            self.find_owners()

    # -- who holds each Parameter and buffer -------------------------------------------------

    def find_owners(self) -> None:
        paths: dict[str, list[Path]] = {}

        def visit(block: Block, path: Path) -> None:
            for stmt in block:
                inner = (
                    (*path, stmt.name)
                    if isinstance(stmt, Call) and stmt.boundary is Boundary.SUBMODULE
                    else path
                )
                for name in direct_names(stmt):
                    paths.setdefault(name, []).append(path)
                visit(children(stmt), inner)

        visit(self.program.body, ())
        for leaf in self.program.leaves:
            if leaf.holder is Holder.INPUT:
                continue
            found = paths.get(leaf.name, [()])
            common: Path = found[0]
            for p in found[1:]:
                n = 0
                while n < min(len(common), len(p)) and common[n] == p[n]:
                    n += 1
                common = common[:n]
            self.owner[leaf.name] = common

    def held(self, name: str, scope: Scope) -> bool:
        return scope.module is not None and self.owner.get(name) == scope.module

    # -- expressions -------------------------------------------------------------------------

    def ref(self, r: Ref, scope: Scope) -> str:
        text = f"self.{r.name}" if self.held(r.name, scope) else r.name
        if r.index is not None:
            text += f"[{r.index}]"
        if r.cast is not None:
            text += f".to(torch.{r.cast})"
        return text

    def arg(self, a: Arg, scope: Scope) -> str:
        if isinstance(a, Ref):
            return self.ref(a, scope)
        if isinstance(a, Seq):
            return "[" + ", ".join(self.arg(x, scope) for x in a.items) + "]"
        return f"torch.{a.value}" if a.dtype else literal(a.value)

    def op_text(self, call: OpCall, scope: Scope, names: dict[str, str] | None = None) -> str:
        def one(a: Arg) -> str:
            if names is not None and isinstance(a, Ref):
                return names[a.name + str(a.index) + str(a.cast)]
            if names is not None and isinstance(a, Seq):
                return "[" + ", ".join(one(x) for x in a.items) + "]"
            return self.arg(a, scope)

        args = [one(a) for a in call.args] + [f"{k}={one(v)}" for k, v in call.kwargs]
        if call.entry.startswith("Tensor."):
            return f"{args[0]}.{call.entry.split('.', 1)[1]}({', '.join(args[1:])})"
        return f"{callee(call.entry)}({', '.join(args)})"

    # -- blocks ------------------------------------------------------------------------------

    def block(self, block: Block, scope: Scope, indent: str) -> list[str]:
        lines = [line for stmt in block for line in self.stmt(stmt, scope, indent)]
        return lines or [f"{indent}pass"]

    def stmt(self, s: Stmt, scope: Scope, indent: str) -> list[str]:
        if isinstance(s, OpCall):
            return [f"{indent}{s.out} = {self.op_text(s, scope)}"]
        if isinstance(s, Mix):
            return [f"{indent}{s.out} = {self.ref(s.a, scope)} + {self.ref(s.b, scope)}"]
        if isinstance(s, Region):
            if s.form is RegionForm.WITH:
                return [
                    f"{indent}with {autocast_text(s.autocast)}:",
                    *self.block(s.body, scope, indent + "    "),
                ]
            return self.helper_call(
                s.name, s.boundary, [f"@{autocast_text(s.autocast)}"], s.body, scope, indent
            )
        if isinstance(s, Call):
            return self.call(s, scope, indent)
        if isinstance(s, GraphBreak):
            return [indent + self.graph_break(s, scope)]
        if isinstance(s, Escape):
            self.escapes = True
            inner = indent + "        "
            return [
                f"{indent}try:",
                f"{indent}    with {autocast_text(s.region.autocast)}:",
                *(line for line in self.block(s.region.body, scope, inner) if line != f"{inner}pass"),
                f'{inner}raise Escaped("raised inside the region")',
                f"{indent}except Escaped:",
                f"{indent}    pass",
            ]
        if isinstance(s, CustomFunction):
            return self.custom_function(s, scope, indent)
        if isinstance(s, CacheSwitch):
            return [f"{indent}{s.setter}({s.enabled})"]
        if isinstance(s, Cond):
            return self.cond(s, scope, indent)
        assert isinstance(s, FlexAttention)
        self.flex = True
        q, k, v = (self.ref(r, scope) for r in (s.q, s.k, s.v))
        mod = ", score_mod=halved_scores" if s.score_mod else ""
        return [f"{indent}{s.out} = flex_attention({q}, {k}, {v}{mod})"]

    def graph_break(self, s: GraphBreak, scope: Scope) -> str:
        if s.kind is Break.GRAPH_BREAK:
            return "torch._dynamo.graph_break()"
        if s.kind is Break.PRINT:
            return 'print("a print inside the program")'
        assert s.ref is not None
        return f"_ = {self.ref(s.ref, scope)}.sum().item()"

    # -- helpers -----------------------------------------------------------------------------

    def params(self, body: Block, scope: Scope) -> tuple[str, ...]:
        """What a helper with ``body`` must be given: what it reads and neither its scope nor a
        submodule called inside it holds."""

        def inside(name: str) -> bool:
            owner = self.owner.get(name)
            m = scope.module
            return m is not None and owner is not None and owner[: len(m)] == m

        return tuple(n for n in free_names(body) if not inside(n))

    def helper_call(
        self,
        name: str,
        boundary: Boundary,
        decorators: list[str],
        body: Block,
        caller: Scope,
        indent: str,
        wrap: Wrap = Wrap.PLAIN,
    ) -> list[str]:
        """Define helper ``name`` (decorated) holding ``body``; the line calling it."""
        if boundary is Boundary.SUBMODULE:
            assert caller.module is not None
            inner = Scope((*caller.module, name))
            self.classes.setdefault(inner.module, ModuleClass(name))  # type: ignore[arg-type]
            self.classes[caller.module].children.append(name)
            target = f"self.{name.lower()}"
            define = "forward"
        elif boundary is Boundary.METHOD:
            inner = caller
            target, define = f"self.{name}", name
        else:
            inner, target, define = Scope(None), name, name
        params = self.params(body, inner)
        outs = values(body)
        self_arg = ["self"] if boundary is not Boundary.FUNCTION else []
        text = [
            *(f"{d}\n" for d in decorators),
            f"def {define}({', '.join([*self_arg, *params])}):\n",
            *(line + "\n" for line in self.block(body, inner, "    ")),
            f"    return {tuple_text(outs)}\n" if outs else "",
        ]
        source = "".join(text)
        if boundary is Boundary.FUNCTION:
            self.functions.append(source)
        else:
            owner = inner.module if boundary is Boundary.SUBMODULE else caller.module
            self.classes[owner].methods.append(source)  # type: ignore[index]
        args = [self.ref(Ref(n), caller) for n in params]
        if wrap is Wrap.CHECKPOINT:
            call = f"torch.utils.checkpoint.checkpoint({', '.join([target, *args])}, use_reentrant=False)"
        else:
            call = f"{target}({', '.join(args)})"
        lhs = ", ".join(outs) + ("," if len(outs) == 1 else "")
        line = f"{indent}{lhs} = {call}" if outs else f"{indent}{call}"
        if wrap is Wrap.NESTED:  # reused, as the region is meant to be: one call site is inlined
            return [f"{indent}{call}  # torch.compile inlines a region called once", line]
        return [line]

    def call(self, s: Call, scope: Scope, indent: str) -> list[str]:
        decorators = {
            Wrap.PLAIN: [],
            Wrap.CHECKPOINT: [],
            Wrap.DISABLE: ["@torch.compiler.disable"],
            Wrap.NESTED: ["@torch.compiler.nested_compile_region"],
        }[s.wrap]
        return self.helper_call(s.name, s.boundary, decorators, s.body, scope, indent, s.wrap)

    def custom_function(self, s: CustomFunction, scope: Scope, indent: str) -> list[str]:
        tensors = list(dict.fromkeys(r.name + str(r.index) + str(r.cast) for r in op_refs(s.call)))
        names = {key: f"t{i}" for i, key in enumerate(tensors)}
        inputs = ", ".join(names.values())
        cast = f", cast_inputs=torch.{s.cast_inputs}" if s.cast_inputs else ""
        forward_call = self.op_text(s.call, Scope(None), names)
        self.functions.append(
            f"class {s.name}(torch.autograd.Function):\n"
            "    @staticmethod\n"
            f"    @{s.fwd}(device_type={s.device!r}{cast})\n"
            f"    def forward(ctx, {inputs}):\n"
            f"        ctx.save_for_backward({inputs})\n"
            f"        return {forward_call}\n\n"
            "    @staticmethod\n"
            f"    @{s.bwd}(device_type={s.device!r})\n"
            "    def backward(ctx, *grads):\n"
            "        # the output gradients' sum spread over each floating input (traceable)\n"
            "        scale = sum(g.float().sum() for g in grads if g is not None)\n"
            "        return tuple(\n"
            "            torch.ones_like(t) * scale if t.is_floating_point() else None\n"
            "            for t in ctx.saved_tensors\n"
            "        )\n"
        )
        refs = {r.name + str(r.index) + str(r.cast): r for r in op_refs(s.call)}
        args = ", ".join(self.ref(refs[key], scope) for key in tensors)
        return [f"{indent}{s.call.out} = {s.name}.apply({args})"]

    def cond(self, s: Cond, scope: Scope, indent: str) -> list[str]:
        inner = Scope(None)
        operands = self.params(s.body, inner)
        outs = values(s.body)
        signature = ", ".join(operands)
        lines = [
            f"{indent}def {s.name}_true({signature}):",
            *self.block(s.body, inner, indent + "    "),
            # torch.cond takes dense outputs only (a permuted or sliced one is a user's error);
            # an op's result may be a structure of tensors (a named tuple)
            f"{indent}    return torch.utils._pytree.tree_map(torch.Tensor.contiguous, {tuple_text(outs)})",
            "",
            f"{indent}def {s.name}_false({signature}):  # the same computation",
            f"{indent}    return {s.name}_true({signature})",
            "",
        ]
        call = (
            f"torch.cond({self.ref(s.pred, scope)} > 0, {s.name}_true, {s.name}_false, "
            f"{tuple_text(tuple(self.ref(Ref(n), scope) for n in operands))})"
        )
        lhs = ", ".join(outs) + ("," if len(outs) == 1 else "")
        return [*lines, f"{indent}{lhs} = {call}" if outs else f"{indent}{call}"]


def direct_names(stmt: Stmt) -> list[str]:
    """The names ``stmt`` itself reads in the code of its scope (not its nested statements')."""
    if isinstance(stmt, OpCall):
        return [r.name for r in op_refs(stmt)]
    if isinstance(stmt, CustomFunction):
        return [r.name for r in op_refs(stmt.call)]
    if isinstance(stmt, Mix):
        return [stmt.a.name, stmt.b.name]
    if isinstance(stmt, GraphBreak) and stmt.ref is not None:
        return [stmt.ref.name]
    if isinstance(stmt, Cond):
        return [stmt.pred.name, *free_names(stmt.body)]
    if isinstance(stmt, FlexAttention):
        return [stmt.q.name, stmt.k.name, stmt.v.name]
    return []

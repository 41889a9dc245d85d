"""Where the pieces of a rendered program go: :func:`program_source`.

The statements are rendered by :class:`.render.Renderer`; here they are laid out as a module
of Python: module-level helpers, the module classes (each with the Parameters and buffers it
owns, built from their seeds in ``__init__``, its submodules and its methods), ``build()``
(a new instance of the program) and ``make_inputs(variant)`` (its graph inputs).
"""

from __future__ import annotations

from .render import ROOT, ModuleClass, Renderer, Scope, tuple_text
from .tree import Form, Holder, Leaf, Program, SecondKind, values


def leaf_tensor(leaf: Leaf, scale: str = "") -> str:
    """The seeded call that builds ``leaf`` (``scale``: a factor on its dimensions)."""
    dims = ", ".join(f"{d}{scale}" for d in leaf.shape)
    shape = f"({dims},)" if len(leaf.shape) == 1 else f"({dims})"
    grad = ", requires_grad=True" if leaf.requires_grad and leaf.holder is Holder.INPUT else ""
    return f"make_tensor({shape}, {leaf.domain!r}, torch.{leaf.dtype}, {leaf.seed}{grad})"


def class_source(cls: ModuleClass) -> str:
    """A module class: its Parameters, buffers and submodules built in ``__init__``, its methods."""
    init = ["    def __init__(self):", "        super().__init__()"]
    for leaf in cls.leaves:
        if leaf.holder is Holder.PARAMETER:
            init.append(f"        self.{leaf.name} = torch.nn.Parameter({leaf_tensor(leaf)})")
        else:
            init.append(f"        self.register_buffer({leaf.name!r}, {leaf_tensor(leaf)})")
    init += [f"        self.{child.lower()} = {child}()" for child in cls.children]
    methods = [
        "\n".join("    " + line if line else "" for line in m.rstrip("\n").split("\n")) for m in cls.methods
    ]
    return "\n\n".join([f"class {cls.name}(torch.nn.Module):\n" + "\n".join(init), *methods]) + "\n"


def program_source(program: Program) -> str:
    """The program's definitions, ``build()`` (a new instance of it) and ``make_inputs(variant)``
    (its graph inputs; ``variant``: every dimension twice as large, for the second call)."""
    r = Renderer(program)
    module = program.form is Form.MODULE
    inputs = program.inputs if module else program.leaves
    outs = values(program.body)
    scope = Scope(()) if module else Scope(None)
    self_arg = ["self"] if module else []
    head = f"def {'forward' if module else 'program'}({', '.join([*self_arg, *(x.name for x in inputs)])}):"
    body = "\n".join([head, *r.block(program.body, scope, "    "), f"    return {tuple_text(outs)}"]) + "\n"
    parts = list(r.functions)
    if module:
        r.classes[()].methods.insert(0, body)
        for leaf in program.leaves:
            if leaf.holder is not Holder.INPUT:
                r.classes[r.owner.get(leaf.name, ())].leaves.append(leaf)
        parts += [class_source(cls) for path, cls in sorted(r.classes.items(), key=lambda i: -len(i[0]))]
        build = f"def build():\n    return {ROOT}()\n"
    else:
        parts.append(body)
        build = "def build():\n    return program\n"
    second = program.context.second
    scale = " * s" if second is not None and second.kind is SecondKind.SHAPE else ""

    def made(leaf: Leaf) -> str:
        text = leaf_tensor(leaf, scale if leaf.shape else "")
        return f"torch.nn.Parameter({text})" if leaf.holder is Holder.PARAMETER else text

    made_inputs = "".join(f"        {made(x)},\n" for x in inputs)
    make_inputs = (
        "def make_inputs(variant):\n"
        "    s = 2 if variant else 1  # the second call's inputs: every dimension twice as large\n"
        f"    return (\n{made_inputs}    )\n"
    )
    prelude = []
    if r.escapes:
        prelude.append(
            'class Escaped(Exception):\n    """Raised inside an autocast region, caught outside it."""\n'
        )
    if r.flex:
        prelude.append(
            "from torch.nn.attention.flex_attention import flex_attention\n\n\n"
            "def halved_scores(score, batch, head, q_index, kv_index):\n    return score / 2\n"
        )
    return "\n\n".join([*prelude, *parts, build, make_inputs])

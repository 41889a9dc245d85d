"""The passes a program runs through (issue 37's list), and what each cannot take.

A pass is one function of :mod:`.pass_code` with its arguments. Where a pass cannot apply to a
program at all, :meth:`Pass.inapplicable` says why before anything runs (inductor's freezing
folds the Parameters of an inference graph: a program that takes gradients is none). Where a
pass cannot capture a construct the program holds (strict export traces one graph: a graph
break cannot be in it), :attr:`Pass.cannot_take` names the feature and the reason: a failure of
such a program is reported as not applicable, with its error; a failure of any other program is
an error the pass should not raise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..modes.aoti_packages import package_configs
from . import pass_code
from .features import features
from .tree import GradMode, Program, SecondKind

GRAPH_BREAKS = ("break:graph_break", "break:print", "break:item", "wrap:disable")
ONE_GRAPH = "strict export traces the program into one graph, which a graph break cannot be in"
ANY_ERROR = ""
# strict export cannot trace a non-reentrant checkpoint, whatever autocast does (seen on torch 2.13:
# RuntimeError: _checkpoint_context_fn, or a TypeError from pytree, an empty checkpointed helper too):
# such a program is not run through it at all, and no test of strict export draws only them
CHECKPOINTED = "strict export cannot trace a non-reentrant torch.utils.checkpoint"
# what torch.compile raises when a dimension marked dynamic is fixed by the program's ops
STATIC = {
    "second:shape": (
        "AssertionError: Guard failed",
        "the exported program keeps static a dimension the program's ops fix (Dim.AUTO); the "
        "second call changes it",
    )
}
SPECIALIZED = (
    "ConstraintViolationError",
    "the program's ops fix a dimension mark_dynamic marks: torch.compile refuses it (a user's error)",
)


def resizing(program: Program) -> bool:
    second = program.context.second
    return second is not None and second.kind is SecondKind.SHAPE


def marked(program: Program) -> bool:
    second = program.context.second
    return second is not None and second.mark_dynamic


def always(program: Program) -> str | None:
    return None


def not_checkpointed(program: Program) -> str | None:
    return CHECKPOINTED if "wrap:checkpoint" in features(program) else None


def training(program: Program) -> str | None:
    """Why freezing cannot take ``program``: it takes gradients, or its module trains."""
    c = program.context
    if c.grad_mode is GradMode.GRAD:
        return "inductor freezes inference graphs only: the program runs with grad enabled"
    if c.training:
        return "inductor freezes inference graphs only: the program's module is in train mode"
    return None


@dataclass(frozen=True)
class Pass:
    name: str
    summary: str
    function: Callable[..., Any]
    arguments: Callable[[Program], Mapping[str, Any]]
    inapplicable: Callable[[Program], str | None] = always
    # feature -> (the error's type name, ANY_ERROR for any; why the pass cannot take the feature)
    cannot_take: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    gradients: bool = True  # False: the callable has no autograd (gradients do not apply)
    # the second call's errors that are not the pass's fault, as cannot_take
    second_cannot_take: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    foci_out: frozenset[str] = frozenset()  # the grammar's dimensions none of whose programs it takes

    @property
    def inference_only(self) -> bool:
        """Takes programs in eval under ``no_grad`` or ``inference_mode`` only (freezing): what
        its cases and campaigns draw."""
        return self.inapplicable is training

    def call_text(self, program: Program) -> str:
        """The line of the script that applies the pass: ``<function>(model, example, ...)``."""
        args = "".join(f", {k}={v!r}" for k, v in self.arguments(program).items())
        return f"{self.function.__name__}(model, example{args})"

    def limit(self, program: Program, error: str, second: bool = False) -> str | None:
        """Why the pass's ``error`` (``"Type: message"``) on ``program`` (in its second call,
        with ``second``) is not the pass's fault: a feature it cannot take (None: the error is
        the pass's)."""
        rules = self.second_cannot_take if second else self.cannot_take
        mine = features(program)
        found = sorted(f for f, (kind, _) in rules.items() if f in mine and error.startswith(kind))
        return f"{rules[found[0]][1]} (the program holds {', '.join(found)})" if found else None


def compile_pass(name: str, backend: str, config: Mapping[str, Any], summary: str, **kw: Any) -> Pass:
    return Pass(
        name,
        summary,
        pass_code.compiled,
        lambda p: {"backend": backend, "config": dict(config), "mark_dynamic": marked(p)},
        cannot_take={"second:mark_dynamic": SPECIALIZED},
        **kw,
    )


def export_pass(name: str, strict: bool, decomposed: bool) -> Pass:
    kind = "strict" if strict else "non-strict"
    after = ", run_decompositions()" if decomposed else ""
    return Pass(
        name,
        f"torch.export.export ({kind}){after}, then .module()",
        pass_code.exported,
        lambda p: {"strict": strict, "decomposed": decomposed, "dynamic": resizing(p)},
        inapplicable=not_checkpointed if strict else always,
        cannot_take=dict.fromkeys(GRAPH_BREAKS, (ANY_ERROR, ONE_GRAPH)) if strict else {},
        second_cannot_take=STATIC,
        foci_out=frozenset({"checkpoint"}) if strict else frozenset(),
    )


PASSES: dict[str, Pass] = {
    p.name: p
    for p in (
        Pass("eager", "eager autocast, the program itself", pass_code.eager, lambda p: {}),
        compile_pass("aot_eager", "aot_eager", {}, "torch.compile(backend='aot_eager')"),
        compile_pass("inductor", "inductor", {}, "torch.compile(backend='inductor')"),
        compile_pass(
            "inductor-emulate_precision_casts",
            "inductor",
            {"emulate_precision_casts": True},
            "torch.compile(backend='inductor') with emulate_precision_casts",
        ),
        compile_pass(
            "inductor-freezing",
            "inductor",
            {"freezing": True},
            "torch.compile(backend='inductor') with freezing=True",
            inapplicable=training,
        ),
        export_pass("export-strict", True, False),
        export_pass("export-nonstrict", False, False),
        export_pass("export-strict-decomposed", True, True),
        export_pass("export-nonstrict-decomposed", False, True),
        Pass(
            "aoti",
            "torch.export (non-strict), AOTInductor package (aoti_compile_and_package, aoti_load_package)",
            pass_code.aoti,
            lambda p: {"dynamic": resizing(p), "configs": package_configs()},
            gradients=False,
            second_cannot_take=STATIC,
        ),
    )
}


def pass_named(name: str) -> Pass:
    """One of :data:`PASSES`, or ``torch.compile`` with a backend they do not name (a vendor's,
    registered with ``torch._dynamo``): its default configuration."""
    return PASSES.get(name) or compile_pass(name, name, {}, f"torch.compile(backend={name!r})")

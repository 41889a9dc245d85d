"""Running a program through a pass (:func:`run`), and reading the ops it calls
(:func:`program_ops`).

:func:`run` renders the program's script for the pass (:func:`.script.render`), writes it to a
file, imports it as a module of its own and calls its ``observe()``: the record is what the
reproduction prints. Around the run, autocast's state is put back whatever the program did to
it (a pass that leaks a region must not change the next run), Dynamo's caches are reset, and
the program's prints are kept out of the caller's output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from autocast_spec.model import Spec

from ..engine.torch_registry import overload_name
from ..harness.state import autocast_state_kept, quiet
from .grammar import Grammar
from .passes import Pass, pass_named
from .records import AutocastState, CallResult, NotApplicable, Output, Record, Side, shape_of
from .reduce import in_float32, with_children, without_autocast
from .script import render
from .script_code import tensors_of
from .tree import (
    Block,
    Break,
    CustomFunction,
    FlexAttention,
    GraphBreak,
    Mix,
    OpCall,
    Program,
    Stmt,
    children,
    values,
    walk,
)

_counter = itertools.count()
DIRECTORY: list[Path] = []

ValueGaps = Callable[[Record], Mapping[str, float]]
"""The outputs of a record whose values the pass gives beyond their tolerance of eager's: a key
per output (its call, value, place and dtype), the largest absolute error. The tolerance is the
caller's (the suite's verdict), so :func:`run` takes it as an argument."""


class ProgramBug(Exception):
    """The machinery made a script that does not run (not an observation of torch)."""


def script_for(program: Program, pass_name: str, spec: Spec) -> str:
    """The standalone script running ``program`` eagerly and through pass ``pass_name``."""
    grammar = Grammar(spec, program.device, program.dtype)
    return render(program, pass_named(pass_name), grammar.state_entry_points, grammar.state_devices)


def load(source: str, directory: Path | None) -> ModuleType:
    """``source`` written to a file of its own and imported as a module."""
    if directory is None:
        if not DIRECTORY:
            DIRECTORY.append(Path(tempfile.mkdtemp(prefix="autocast_programs_")))
        directory = DIRECTORY[0]
    name = f"autocast_program_{os.getpid()}_{next(_counter)}"
    path = directory / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ProgramBug(f"{path}: the rendered script does not import: {exc!r}") from exc
    return module


@contextlib.contextmanager
def isolated(devices: tuple[str, ...]) -> Iterator[None]:
    """Autocast's state put back, Dynamo's caches reset, prints and warnings kept in."""
    torch._dynamo.reset()
    with autocast_state_kept(*devices), quiet(), contextlib.redirect_stdout(io.StringIO()):
        yield


def op_of(program: Program) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for s in walk(program.body):
        if isinstance(s, OpCall):
            found[s.out] = s.op
        elif isinstance(s, CustomFunction):
            found[s.call.out] = s.call.op
        elif isinstance(s, (Mix, FlexAttention)):
            found[s.out] = None
    return found


def labels(program: Program, outputs: Any) -> tuple[Output, ...]:
    ops = op_of(program)
    return tuple(
        Output(name, ops.get(name), i)
        for name, value in zip(values(program.body), outputs, strict=False)
        for i, _ in enumerate(tensors_of(value))
    )


def call_result(seen: Mapping[str, Any] | None) -> CallResult | None:
    if seen is None:
        return None
    outputs = tuple(t.detach() for t in tensors_of(seen["outputs"]))
    return CallResult(outputs, seen["error"], AutocastState.of(seen["state"]))


def side(seen: Mapping[str, Any], gradients: bool) -> Side:
    grads = seen["gradients"] if gradients else None
    error = grads.get("error") if isinstance(grads, dict) and "error" in grads else None
    return Side(
        seen["pass_error"],
        call_result(seen["first"]),
        None if error is not None or grads is None else dict(grads),
        error,
        call_result(seen["second"]),
    )


def classify(how: Pass, program: Program, eager: Side, got: Side) -> NotApplicable | None:
    """A failure of the pass on a construct it cannot capture: not applicable, with its error."""
    if eager.error is not None or got.error is None:
        return None
    why = how.limit(program, got.error)
    return NotApplicable(why, got.error) if why is not None else None


def classify_second(how: Pass, program: Program, eager: Side, got: Side) -> NotApplicable | None:
    """A second call the pass cannot make (an exported program's static dimension)."""
    if eager.second is None or got.second is None or eager.second.error or not got.second.error:
        return None
    why = how.limit(program, got.second.error, second=True)
    return NotApplicable(why, got.second.error) if why is not None else None


def run(
    program: Program,
    pass_name: str,
    spec: Spec,
    *,
    directory: Path | None = None,
    value_gaps: ValueGaps | None = None,
) -> Record:
    """``program`` run eagerly and through ``pass_name`` (one of :data:`.passes.PASSES`), from
    its script written under ``directory`` (default: a temporary directory of the process).

    Where the pass raises and eager ran (the first call, or else the second), the program is
    run again with every region disabled (where eager cannot run that, its lower-precision
    leaves made float32 too): if eager runs it so and the pass raises the same error in the same
    call (its type and message alike, :func:`.records.shape_of`: numbers and names blurred,
    dtypes kept), the failure is the pass's whatever autocast does (not applicable here: a
    torch.compile bug, not autocast's). Where it raises nothing without autocast (or eager cannot
    run that), the program is run through the pass once more: an error that compiling it again does not raise
    is the process's (torch's lazy set-up: on 2.13.0 a ``nested_compile_region`` body returning
    ``_transform_bias_rescale_qkv``'s outputs raises "Encountered aliasing" on its first compile
    only, with or without autocast), not applicable too. The same where the pass gives gradients to other
    parameters and inputs than eager does (strict export's module gives none through a custom
    autograd Function) and gives the same without autocast. The same, with ``value_gaps``, where
    the pass's values of an output differ from eager's beyond its tolerance: if, without
    autocast, the same output (its dtype alike) differs by at least half as much, the difference
    is the pass's numerics whatever autocast does (inductor's grid_sampler on bfloat16 in a
    disabled region)."""
    record = _run(program, pass_name, spec, directory)
    error, lost = raised(record), gradients_missing(record)
    gaps = value_gaps(record) if value_gaps is not None and error is None and lost is None else {}
    if error is None and lost is None and not gaps:
        return record
    off = _run(without_autocast(program), pass_name, spec, directory)
    if off.eager is not None and off.eager.call_error:
        off = _run(in_float32(without_autocast(program)), pass_name, spec, directory)
    if gaps:
        assert value_gaps is not None
        return values_not_autocasts(record, gaps, value_gaps(off))
    if error is None:
        if gradients_missing(off) != lost:
            return record
        why = f"the pass gives gradients to other tensors than eager without autocast too: {lost}"
        return dataclasses.replace(record, not_applicable=NotApplicable(why))
    bare = raised(off)
    if bare is None:  # without autocast it runs (or eager cannot run it): the same program again
        again = _run(program, pass_name, spec, directory)
        return record if raised(again) else first_compile_only(record, error)
    if bare[0] != error[0] or shape_of(bare[1]) != shape_of(error[1]):
        return record
    why = f"the pass raises without autocast too: {bare[1][:200]}"
    return dataclasses.replace(record, not_applicable=NotApplicable(why, error[1]))


def first_compile_only(record: Record, error: tuple[str, str]) -> Record:
    """``record``, not applicable: its pass raised ``error`` compiling the program, and compiling
    it again in the same process raised nothing."""
    why = f"the pass raised only on its first compile of the program in this process: {error[1][:200]}"
    return dataclasses.replace(record, not_applicable=NotApplicable(why, error[1]))


def values_not_autocasts(record: Record, gaps: Mapping[str, float], bare: Mapping[str, float]) -> Record:
    """``record``, not applicable where each output whose values differ (``gaps``) differs
    without autocast too (``bare``: the same key, so the same dtype) by at least half as much."""
    if any(bare.get(key, 0.0) < gap / 2 for key, gap in gaps.items()):
        return record
    seen = ", ".join(f"{key}: {gap:.3g} with autocast, {bare[key]:.3g} without" for key, gap in gaps.items())
    return dataclasses.replace(
        record, not_applicable=NotApplicable(f"the pass's values differ without autocast too: {seen}")
    )


def gradients_missing(record: Record) -> str | None:
    """Where both sides ran and the pass gives gradients to other tensors than eager (by name:
    given by one side only), which; else None."""
    got, eager = record.got, record.eager
    if record.not_applicable is not None or got is None or eager is None or eager.error or got.error:
        return None
    if not record.gradients_apply or eager.gradients is None:
        return None
    have = {side: {k for k, v in (g or {}).items() if v is not None} for side, g in
            (("eager", eager.gradients), ("pass", got.gradients))}  # fmt: skip
    if have["eager"] == have["pass"]:
        return None
    return f"eager {sorted(have['eager'])}, pass {sorted(have['pass'])}"


def raised(record: Record) -> tuple[str, str] | None:
    """Which call of the pass raised where eager ran (the first, or else the second), and its
    error (None: none)."""
    got, eager = record.got, record.eager
    if record.not_applicable is not None or got is None or eager is None or eager.call_error:
        return None
    if record.pass_raised_eagers_backward_error:
        return None  # eager's error: nothing of the pass's to excuse
    first = got.raised_where_ran(eager)
    if first:
        return "first", first
    if record.second_not_applicable or not (eager.second and got.second) or eager.second.error:
        return None
    return ("second", got.second.error) if got.second.error else None


def _run(program: Program, pass_name: str, spec: Spec, directory: Path | None) -> Record:
    how = pass_named(pass_name)
    source = script_for(program, pass_name, spec)
    why = how.inapplicable(program)
    if why is not None:
        return Record(
            program, pass_name, None, None, (), NotApplicable(why), None, how.gradients, source, 0.0
        )
    start = time.perf_counter()
    devices = Grammar(spec, program.device, program.dtype).state_devices
    with isolated(devices):
        module = load(source, directory)
        try:
            observed = module.observe()
        finally:
            sys.modules.pop(module.__name__, None)
    eager = side(observed["eager"], True)
    got = side(observed["pass"], how.gradients)
    first = observed["eager"]["first"]
    outputs = labels(program, first["outputs"]) if first and first["error"] is None else ()
    return Record(
        program,
        pass_name,
        eager,
        got,
        outputs,
        classify(how, program, eager, got),
        classify_second(how, program, eager, got),
        how.gradients,
        source,
        time.perf_counter() - start,
    )


def without_items(block: Block) -> Block:
    """``block`` without its ``.item()`` graph breaks (a tracer cannot read a value)."""
    out: list[Stmt] = []
    for s in block:
        if isinstance(s, GraphBreak) and s.kind is Break.ITEM:
            continue
        inner = children(s)
        out.append((with_children(s, without_items(inner)) or s) if inner else s)
    return tuple(out)


def program_ops(program: Program, spec: Spec) -> tuple[str, ...]:
    """The aten overloads ``program`` calls (the root graph's in order, then each higher-order
    op's body), as autocast meets them first: a pre-dispatch trace (``make_fx(pre_dispatch=True)``)
    of the eager program on its first call's inputs, which stops above the Autocast key (an
    entry point that is an op of its own, ``torch.concatenate``, shows as that op, which autocast
    passes through to ``aten::cat``). The ``.item()`` of a graph break is left out."""
    devices = Grammar(spec, program.device, program.dtype).state_devices
    traced = dataclasses.replace(program, body=without_items(program.body))
    with isolated(devices):
        module = load(script_for(traced, "eager", spec), None)
        try:
            model, inputs = module.build(), module.make_inputs(False)
            if isinstance(model, torch.nn.Module):
                model.train(program.context.training)
            with module.around_first():
                graph = make_fx(lambda *t: model(*t), pre_dispatch=True)(*inputs)
        finally:
            sys.modules.pop(module.__name__, None)
    return tuple(
        overload_name(node.target)
        for gm in graph.modules()
        if isinstance(gm, torch.fx.GraphModule)
        for node in gm.graph.nodes
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
    )

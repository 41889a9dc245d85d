"""Which catalogued ops run another dtype than eager inside a body that a pass treats otherwise
than eager autocast does, under an autocast region (findings F4, F10, F13 and F14; the known
bugs whose ``ops`` it lists: ``compiled-subgraph-composite-under-ambient``,
``compiled-cond-branch-composite-under-region``, their ``entry`` twins, and
``export-*-decomposed-region-under-ambient``).

Each op's forms (every entry point and aten overload with a catalog sample, as the generated
programs call them; with ``--forms unlisted``, the first runnable form of each op autocast does
not list) run in the body, eagerly and through the pass; the output dtypes are compared. The
bodies:

- ``subgraph``: a reused ``torch.compiler.nested_compile_region``, called twice in the region (a
  region called once is inlined), without gradients; the pass is ``torch.compile(backend=...)``;
- ``cond``: both branches of a ``torch.cond`` called in the region; the pass as for ``subgraph``;
- ``decomposed``: a region with ``enabled=False`` around the op, in a module exported
  (``--export strict`` or ``nonstrict``) and decomposed with ``run_decompositions()``, called
  without gradients under the region; the pass is the decomposed program's ``.module()``;
- ``called``: the op alone in a module exported and decomposed outside any region, then called
  under the region (F16: an op the decomposition turns into ops autocast does not list loses
  the region's cast, conv2d into convolution).

A pass that raises is reported as such, not as a dtype difference (a body cannot return a view
of its input, for instance)::

    python benchmarks/scan_hop_ops.py --hop cond --forms all --inputs lower --dtype bfloat16
    python benchmarks/scan_hop_ops.py --hop decomposed --forms all --dtype float16 --export strict
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from reference_impl.engine.dtypes import dtype_of
from reference_impl.programs.menu import UNLISTED, Menu, OpForm, menu_for, rebuilt
from reference_impl.programs.script_code import make_tensor, tensors_of
from reference_impl.spectools.installed_spec import load_installed_spec


def dtypes_of(fn: Any, args: tuple[Any, ...]) -> list[str]:
    with torch.no_grad():
        return [str(t.dtype).removeprefix("torch.") for t in tensors_of(fn(*args))]


def in_subgraph(call: Callable[..., Any], device: str, dtype: torch.dtype) -> Callable[..., Any]:
    body = torch.compiler.nested_compile_region(call)

    def program(*a: Any) -> Any:
        with torch.autocast(device, dtype=dtype):
            body(*a)  # a second call site: a region called once is inlined
            return body(*a)

    return program


def tensors_bound(
    call: Callable[..., Any], args: tuple[Any, ...]
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """``call`` taking the tensors of ``args`` only, those in a list too (the rest bound: export
    takes tensors), and them. A list's tensors left bound would be the exported program's lifted
    constants: with no input beside them, torch.export (2.13.0) orders them wrongly and raises
    "used before it has been defined" without autocast (pytorch#136658 fixed the same for one
    case), which is not what the scan looks for."""
    leaves, structure = torch.utils._pytree.tree_flatten(args)
    at = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]

    def on_tensors(*tensors: Any) -> Any:
        flat = list(leaves)
        for i, t in zip(at, tensors, strict=True):
            flat[i] = t
        return call(*torch.utils._pytree.tree_unflatten(flat, structure))

    return on_tensors, tuple(leaves[i] for i in at)


def in_cond(call: Callable[..., Any], device: str, dtype: torch.dtype) -> Callable[..., Any]:
    def program(*a: Any) -> Any:
        on_tensors, operands = tensors_bound(call, a)  # a branch's operands: the tensors

        def branch(*tensors: Any) -> Any:  # new tensors: a branch returns no view of an input
            return torch.utils._pytree.tree_map(torch.Tensor.contiguous, on_tensors(*tensors))

        with torch.autocast(device, dtype=dtype):
            return torch.cond(torch.tensor(True), branch, branch, operands)

    return program


class InDisabledRegion(torch.nn.Module):
    """The op under ``autocast(enabled=False)``: the body export decomposes (F4)."""

    def __init__(self, call: Callable[..., Any], device: str) -> None:
        super().__init__()
        self.call = call
        self.device: str = device

    def forward(self, *a: Any) -> Any:
        with torch.autocast(self.device, enabled=False):
            return self.call(*a)


class Alone(torch.nn.Module):
    """The op alone: the body export decomposes outside any region (F16)."""

    def __init__(self, call: Callable[..., Any], device: str) -> None:
        super().__init__()
        self.call = call

    def forward(self, *a: Any) -> Any:
        return self.call(*a)


def in_region_around(module_class: type[torch.nn.Module]) -> Callable[..., Callable[..., Any]]:
    """The program: ``module_class`` holding the op, called under the region."""

    def body(call: Callable[..., Any], device: str, dtype: torch.dtype) -> Callable[..., Any]:
        module = module_class(call, device)

        def program(*a: Any) -> Any:
            with torch.autocast(device, dtype=dtype):
                return module(*a)

        program.call = call  # type: ignore[attr-defined]  # what decomposed() exports
        program.module_class = module_class  # type: ignore[attr-defined]
        return program

    return body


def compiled(
    program: Callable[..., Any], args: tuple[Any, ...], how: argparse.Namespace
) -> Callable[..., Any]:
    return torch.compile(program, backend=how.backend, fullgraph=True)


def decomposed(
    program: Callable[..., Any], args: tuple[Any, ...], how: argparse.Namespace
) -> Callable[..., Any]:
    call, tensors = tensors_bound(program.call, args)  # type: ignore[attr-defined]
    module_class = program.module_class  # type: ignore[attr-defined]
    ep = torch.export.export(module_class(call, how.device), tensors, strict=how.export == "strict")
    module = ep.run_decompositions().module()

    def through(*a: Any) -> Any:
        with torch.autocast(how.device, dtype=dtype_of(how.dtype)):
            return module(*tensors)

    return through


# body -> (the program around the op, the pass applied to it)
HOPS = {
    "subgraph": (in_subgraph, compiled),
    "cond": (in_cond, compiled),
    "decomposed": (in_region_around(InDisabledRegion), decomposed),
    "called": (in_region_around(Alone), decomposed),
}


def scan(form: OpForm, target: Any, how: argparse.Namespace) -> tuple[list[str], ...]:
    """(eager's output dtypes, the pass's, or ["raises <Type>"]). The sample's floating tensors
    are float32 (``inputs`` "float32": a lost cast to the lower dtype shows) or the region's
    dtype ("lower": a lost cast to float32 shows)."""
    floating = torch.float32 if how.inputs == "float32" else dtype_of(how.dtype)
    args, kwargs = rebuilt(
        form.sample,
        lambda i, s: make_tensor(s.shape, s.domain, floating if s.dtype == "float" else dtype_of(s.dtype), i),
    )
    body, through_pass = HOPS[how.hop]
    program = body(lambda *a: target(*a, **kwargs), how.device, dtype_of(how.dtype))
    eager = dtypes_of(program, args)
    torch._dynamo.reset()
    try:
        return eager, dtypes_of(through_pass(program, args, how), args)
    except Exception as e:  # the pass cannot take it: reported, not compared
        return eager, [f"raises {type(e).__name__}"]


def forms(menu: Menu, which: str) -> Iterator[OpForm]:
    if which == "unlisted":
        yield from menu.by_policy.get(UNLISTED, ())
        return
    for policy_forms in menu.by_policy.values():
        yield from policy_forms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hop", choices=sorted(HOPS), default="subgraph")
    parser.add_argument("--forms", choices=("unlisted", "all"), default="unlisted")
    parser.add_argument("--inputs", choices=("float32", "lower"), default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--backend", default="aot_eager", help="torch.compile's backend (subgraph, cond)")
    parser.add_argument(
        "--export", choices=("strict", "nonstrict"), default="nonstrict", help="(decomposed, called)"
    )
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    menu = menu_for(load_installed_spec(), args.device, args.dtype)
    scanned: dict[tuple[str, str], tuple[list[str], ...]] = {}
    done: set[str] = set()
    for form in forms(menu, args.forms):
        key = (form.op, form.entry)
        if key in scanned or (args.forms == "unlisted" and form.op in done):
            continue
        try:
            target = menu.target(form)
            scanned[key] = scan(form, target, args)
            done.add(form.op)
        except Exception:  # eager cannot run this form so: the op's next form is tried
            continue
    through = f"export {args.export}" if args.hop in ("decomposed", "called") else f"backend {args.backend}"
    print(f"torch {torch.__version__}, {args.device} {args.dtype}, {through}, ", end="")
    print(f"in {args.hop}, forms {args.forms}, {args.inputs} inputs")
    for (op, entry), (eager, got) in scanned.items():
        if eager != got:
            kind = "raises" if got[0].startswith("raises") else "differs"
            through = "" if entry == op else f" (through {entry})"
            print(f"{kind}: {op}{through}: eager {', '.join(eager)}; pass {', '.join(got)}")
    differ = sum(e != g and not g[0].startswith("raises") for e, g in scanned.values())
    print(f"{len(scanned)} forms of {len(done)} ops scanned; {differ} run another dtype")
    return 0


if __name__ == "__main__":
    sys.exit(main())

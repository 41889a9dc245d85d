"""Which catalogued ops run another dtype than eager inside a higher-order op's body under an
autocast region, compiled (findings F10 and F13, known bugs
``compiled-subgraph-composite-under-ambient`` and ``compiled-cond-branch-composite-under-region``,
whose ``ops`` it lists).

Each op's forms (every entry point and aten overload with a catalog sample, as the generated
programs call them; with ``--forms unlisted``, the first runnable form of each op autocast does
not list) run in the body, eagerly and through ``torch.compile(backend=...)``; the output
dtypes are compared. The bodies:

- ``subgraph``: a reused ``torch.compiler.nested_compile_region``, called twice in the region (a
  region called once is inlined), without gradients;
- ``cond``: both branches of a ``torch.cond`` called in the region.

A pass that raises is reported as such, not as a dtype difference (a body cannot return a view
of its input, for instance)::

    python benchmarks/scan_hop_ops.py --hop cond --forms all --inputs lower --dtype bfloat16
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


def in_cond(call: Callable[..., Any], device: str, dtype: torch.dtype) -> Callable[..., Any]:
    def program(*a: Any) -> Any:
        at = [i for i, x in enumerate(a) if isinstance(x, torch.Tensor)]  # a branch's operands

        def branch(*tensors: Any) -> Any:  # new tensors: a branch returns no view of an input
            args = list(a)
            for i, t in zip(at, tensors, strict=True):
                args[i] = t
            return torch.utils._pytree.tree_map(torch.Tensor.contiguous, call(*args))

        with torch.autocast(device, dtype=dtype):
            return torch.cond(torch.tensor(True), branch, branch, tuple(a[i] for i in at))

    return program


HOPS = {"subgraph": in_subgraph, "cond": in_cond}


def scan(
    form: OpForm, target: Any, hop: str, device: str, dtype: str, backend: str, inputs: str
) -> tuple[list[str], ...]:
    """(eager's output dtypes, the pass's, or ["raises <Type>"]). The sample's floating tensors
    are float32 (``inputs`` "float32": a lost cast to the lower dtype shows) or the region's
    dtype ("lower": a lost cast to float32 shows)."""
    floating = torch.float32 if inputs == "float32" else dtype_of(dtype)
    args, kwargs = rebuilt(
        form.sample,
        lambda i, s: make_tensor(s.shape, s.domain, floating if s.dtype == "float" else dtype_of(s.dtype), i),
    )
    program = HOPS[hop](lambda *a: target(*a, **kwargs), device, dtype_of(dtype))
    eager = dtypes_of(program, args)
    torch._dynamo.reset()
    try:
        return eager, dtypes_of(torch.compile(program, backend=backend, fullgraph=True), args)
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
    parser.add_argument("--backend", default="aot_eager", help="torch.compile's backend")
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
            scanned[key] = scan(form, target, args.hop, args.device, args.dtype, args.backend, args.inputs)
            done.add(form.op)
        except Exception:  # eager cannot run this form so: the op's next form is tried
            continue
    print(f"torch {torch.__version__}, {args.device} {args.dtype}, backend {args.backend}, ", end="")
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

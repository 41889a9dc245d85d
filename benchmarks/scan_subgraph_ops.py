"""Which of the device's unlisted catalogued ops run another dtype than eager inside a reused
``torch.compiler.nested_compile_region`` called under an autocast region without gradients
(finding F10, known bug ``compiled-subgraph-composite-under-ambient``, whose ``ops`` it lists).

Each op's first runnable form (entry point or aten overload with a catalog sample, as the
generated programs call it) runs in a region called twice (a region called once is inlined),
eagerly and through ``torch.compile(backend=...)``; the output dtypes are compared. A pass that
raises is reported as such (not a dtype difference: e.g. a region cannot return a view).

    python benchmarks/scan_subgraph_ops.py --device cpu --dtype bfloat16 --backend aot_eager
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

import torch

from reference_impl.engine.dtypes import dtype_of
from reference_impl.programs.menu import UNLISTED, OpForm, menu_for, rebuilt
from reference_impl.programs.script_code import make_tensor, tensors_of
from reference_impl.spectools.installed_spec import load_installed_spec


def dtypes_of(fn: Any, args: tuple[Any, ...]) -> list[str]:
    with torch.no_grad():
        return [str(t.dtype).removeprefix("torch.") for t in tensors_of(fn(*args))]


def scan(form: OpForm, target: Any, device: str, dtype: str, backend: str) -> tuple[list[str], list[str]]:
    """(eager's output dtypes, the pass's, or ["raises <Type>"])."""
    args, kwargs = rebuilt(
        form.sample,
        lambda i, s: make_tensor(
            s.shape, s.domain, torch.float32 if s.dtype == "float" else dtype_of(s.dtype), i
        ),
    )
    body = torch.compiler.nested_compile_region(lambda *a: target(*a, **kwargs))

    def program(*a: Any) -> Any:
        with torch.autocast(device, dtype=dtype_of(dtype)):
            body(*a)  # a second call site: a region called once is inlined
            return body(*a)

    eager = dtypes_of(program, args)
    torch._dynamo.reset()
    try:
        return eager, dtypes_of(torch.compile(program, backend=backend, fullgraph=True), args)
    except Exception as e:  # the pass cannot take it: reported, not compared
        return eager, [f"raises {type(e).__name__}"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--backend", default="aot_eager", help="torch.compile's backend")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    menu = menu_for(load_installed_spec(), args.device, args.dtype)
    scanned: dict[str, tuple[list[str], list[str]]] = {}
    for form in menu.by_policy.get(UNLISTED, ()):
        if form.op in scanned:
            continue
        try:
            target = menu.target(form)
            scanned[form.op] = scan(form, target, args.device, args.dtype, args.backend)
        except Exception:  # eager cannot run this form so: the op's next form is tried
            continue
    print(f"torch {torch.__version__}, {args.device} {args.dtype}, backend {args.backend}")
    for op, (eager, got) in scanned.items():
        if eager != got:
            kind = "raises" if got[0].startswith("raises") else "differs"
            print(f"{kind}: {op}: eager {', '.join(eager)}; pass {', '.join(got)}")
    differ = sum(e != g and not g[0].startswith("raises") for e, g in scanned.values())
    print(f"{len(scanned)} unlisted ops scanned; {differ} run another dtype")
    return 0


if __name__ == "__main__":
    sys.exit(main())

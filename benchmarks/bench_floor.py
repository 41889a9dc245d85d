"""How much of the reference autocast's overhead is the dispatcher's cost of a Python kernel.

The reference autocast's kernels are Python functions the dispatcher calls at the borrowed
Autocast key (``reference_impl.kernels.reference_dispatch``). This benchmark registers, at the same
key and for the same ops (every op the cpu spec lists that this torch has), a kernel that
does nothing but call on below the key, switches the key on as a reference region does, and
times native autocast with and without those kernels on the six Hugging Face models of
``bench_models.py`` (paired, median of per-pair ratios). The ratio is the floor any Python
reference kernel pays on that model; ``bench_models.py``'s ratio minus this one is what the
reference's own work (plan lookup, casts from Python, cache) adds. Run it in its own process:
it takes the key the reference would use. Nothing is asserted: the script prints figures.

    python benchmarks/bench_floor.py [--pairs 30] [--models bert,gpt2] [--dtypes bfloat16,float16]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

import hf_models
import torch
from paired import paired

from reference_impl.engine.torch_registry import op_exists, op_overload, split_op_name
from reference_impl.kernels.reference_dispatch import REFERENCE_KEY, REFERENCE_KEY_NAME
from reference_impl.spectools.installed_spec import load_installed_spec


def register_passthrough(device: str = "cpu") -> tuple[list[torch.library.Library], int]:
    """A do-nothing Python kernel at the reference key for each op the device's spec lists."""
    excluded = torch._C.DispatchKeySet(REFERENCE_KEY)
    guard = torch._C._ExcludeDispatchKeyGuard
    libs: dict[str, torch.library.Library] = {}
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(torch.library.fallthrough_kernel, REFERENCE_KEY_NAME)
    ops = [op for op in sorted(load_installed_spec().device(device).ops) if op_exists(op)]
    for op in ops:
        call = op_overload(op)._op

        def kernel(*args: Any, _call: Any = call, **kwargs: Any) -> Any:
            with guard(excluded):
                return _call(*args, **kwargs)

        ns, name, overload = split_op_name(op)
        if ns not in libs:
            libs[ns] = torch.library.Library(ns, "IMPL")
        libs[ns].impl(f"{name}.{overload}" if overload else name, kernel, REFERENCE_KEY_NAME)
    return [fallback, *libs.values()], len(ops)


@contextlib.contextmanager
def floor_region(dtype: torch.dtype) -> Iterator[None]:
    """Native autocast with the pass-through kernels switched on in this thread."""
    torch._C._dispatch_tls_set_dispatch_key_included(REFERENCE_KEY, True)
    torch._C._dispatch_tls_set_dispatch_key_excluded(REFERENCE_KEY, False)
    try:
        with torch.autocast("cpu", dtype=dtype):
            yield
    finally:
        torch._C._dispatch_tls_set_dispatch_key_included(REFERENCE_KEY, False)
        torch._C._dispatch_tls_set_dispatch_key_excluded(REFERENCE_KEY, True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--models", default=",".join(hf_models.MODELS), help="comma-separated, of: %(default)s")
    p.add_argument("--dtypes", default="bfloat16,float16")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    error = hf_models.unknown_names(a.models)
    if error:
        print(error, file=sys.stderr)
        return 2
    names = a.models.split(",")
    _libs, n = register_passthrough()
    print(
        f"torch {torch.__version__}, 1 thread, {a.pairs} paired fwd+bwd steps (cpu time), {n} pass-through "
        f"kernels at {REFERENCE_KEY_NAME}; load average before: {os.getloadavg()[0]:.2f}"
    )
    print(f"  {'model':9s} {'dtype':9s} {'native ms':>10s} {'floor ms':>10s} {'ratio':>7s}")
    for name in names:
        model, inputs = hf_models.build(name)
        for dname in a.dtypes.split(","):
            dtype = getattr(torch, dname)
            r = paired(
                lambda region, m=model, i=inputs: hf_models.step(m, i, region, time.process_time),
                lambda d=dtype: torch.autocast("cpu", dtype=d),
                lambda d=dtype: floor_region(d),
                a.pairs,
                a.warmup,
            )
            print(f"  {name:9s} {dname:9s} {r.native * 1e3:10.2f} {r.reference * 1e3:10.2f} {r.ratio:6.3f}x")
    print(f"  load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

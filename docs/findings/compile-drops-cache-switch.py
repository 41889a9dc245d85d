"""torch.set_autocast_cache_enabled() inside a compiled function is undone by AOTAutograd
(aot_eager, inductor, AOTInductor); backend="eager" and eager keep it. Seen on torch 2.13.0 cpu;
no public report found. Found by the programs category (known bug compiled-cache-switch-undone).

Run: python docs/findings/compile-drops-cache-switch.py (torch only)."""

import torch


def f(x):
    torch.set_autocast_cache_enabled(False)
    return x + 1


for backend in ("eager", "aot_eager"):
    torch._dynamo.reset()
    torch.set_autocast_cache_enabled(True)
    torch.compile(f, backend=backend)(torch.ones(2))
    print(backend, "cache enabled after the compiled call:", torch.is_autocast_cache_enabled())
torch.set_autocast_cache_enabled(True)
f(torch.ones(2))
print("eager: cache enabled after the call:", torch.is_autocast_cache_enabled())

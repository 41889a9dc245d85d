"""Under a region around the call, with gradients, the autocast region inside a reused
torch.compiler.nested_compile_region (invoke_subgraph) is lost by torch.compile's AOTAutograd
backends: the disabled region's matmul runs bfloat16 (eager: float32). Without gradients, with
the region inside the compiled function, or with backend="eager", it is kept. Seen on torch
2.13.0 cpu; no public report found.

The region is called twice: torch.compile inlines a nested_compile_region called once
(torch._dynamo.config.inline_single_use_invoke_subgraph, pytorch#180674), and then the region
is kept.

Run: python docs/findings/subgraph-region-under-ambient.py (torch only)."""

import torch


@torch.compiler.nested_compile_region
def h(x, w):
    with torch.autocast("cpu", enabled=False):
        return x.matmul(w)


def f(x, w):
    h(x, w)  # a second call site: a region called once is inlined
    return h(x, w)


x, w = torch.randn(8, 16), torch.randn(16, 4, requires_grad=True)
with torch.autocast("cpu", dtype=torch.bfloat16):
    print("eager:", f(x, w).dtype)  # float32
    for backend in ("eager", "aot_eager", "inductor"):
        torch._dynamo.reset()
        print(f"torch.compile(backend={backend!r}):", torch.compile(f, backend=backend)(x, w).dtype)
    torch._dynamo.reset()
    with torch.no_grad():
        print("aot_eager under no_grad:", torch.compile(f, backend="aot_eager")(x, w).dtype)

"""Under a region around the call, with gradients, a region entered inside the compiled function
is lost in a reused torch.compiler.nested_compile_region (invoke_subgraph) by torch.compile's
AOTAutograd backends: the body runs under the region around the compiled call.

- In the body: its disabled region's matmul runs bfloat16 (eager: float32).
- Around the call sites, in the compiled function: binary_cross_entropy_with_logits, called
  where autocast is disabled, runs float32, the outer region's policy (eager: bfloat16, its
  inputs' dtype). The generated programs met this one on a program's second call.

Without gradients, or with backend="eager", it is kept. With
torch._functorch.config.backward_pass_autocast = "off" it is kept too: under its default,
"same_as_forward", AOTAutograd traces the reused body under the compiled call's autocast state.
pytorch#177286 and pytorch#177287 deprecate that default and would make it "off" (for the
compiled backward's dtypes, pytorch#153044); the loss of a region in the forward of a reused
nested_compile_region is not reported there. Seen on torch 2.13.0 cpu, 2.14.1 and 2.15.0.

Each region is called twice: torch.compile inlines a nested_compile_region called once
(torch._dynamo.config.inline_single_use_invoke_subgraph, pytorch#180674), and then the region
is kept.

Run: python docs/findings/subgraph-region-under-ambient.py (torch only)."""

import torch
import torch._functorch.config as functorch_config


@torch.compiler.nested_compile_region
def h(x, w):
    with torch.autocast("cpu", enabled=False):
        return x.matmul(w)


def f(x, w):
    h(x, w)  # a second call site: a region called once is inlined
    return h(x, w)


@torch.compiler.nested_compile_region
def g(x, t):
    return torch.binary_cross_entropy_with_logits(x, t)


@torch.autocast("cpu", enabled=False)
def k(x, t):
    g(x, t)
    return g(x, t)


x, w = torch.randn(8, 16), torch.randn(16, 4, requires_grad=True)
y = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)
t = torch.randint(0, 2, (4, 8)).to(torch.bfloat16)
with torch.autocast("cpu", dtype=torch.bfloat16):
    print("region in the body, eager:", f(x, w).dtype)  # float32
    for backend in ("eager", "aot_eager", "inductor"):
        torch._dynamo.reset()
        print(f"torch.compile(backend={backend!r}):", torch.compile(f, backend=backend)(x, w).dtype)
    torch._dynamo.reset()
    with torch.no_grad():
        print("aot_eager under no_grad:", torch.compile(f, backend="aot_eager")(x, w).dtype)
    print("region around the calls, eager:", k(y, t).dtype)  # bfloat16
    torch._dynamo.reset()
    print("torch.compile(backend='aot_eager'):", torch.compile(k, backend="aot_eager")(y, t).dtype)
    functorch_config.backward_pass_autocast = "off"
    for name, fn, args in (("in the body", f, (x, w)), ("around the calls", k, (y, t))):
        torch._dynamo.reset()
        got = torch.compile(fn, backend="aot_eager")(*args).dtype
        print(f"backward_pass_autocast='off', region {name}, aot_eager:", got)

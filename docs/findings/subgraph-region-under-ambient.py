"""With gradients, a reused torch.compiler.nested_compile_region loses the autocast state of its
call sites under torch.compile's AOTAutograd backends (aot_eager, inductor): its body runs under the
state around the compiled call instead, so a region entered inside the compiled function is lost.

- Under a region around the compiled call, a disabled region in the body: its matmul runs
  bfloat16 (eager: float32).
- Under a region around the compiled call, a disabled region around the call sites:
  binary_cross_entropy_with_logits runs float32, the outer region's policy (eager: bfloat16, its
  inputs' dtype). The generated programs met this one on a program's second call (2.15.0).
- With no region around the compiled call, a float16 region around the call sites: bmm on
  bfloat16 inputs runs bfloat16, uncast (eager: float16). The 2.13.0 inductor campaign met this
  one (its program 1503, reduced by hand).

Without gradients, or with backend="eager", the call sites' state is kept.
torch._functorch.config.backward_pass_autocast = "off" (pytorch#177286 and pytorch#177287 would
make it the default, for the compiled backward's dtypes) does not keep it: it gives the first two
eager's dtypes only because the body then runs with autocast off, and the third stays bfloat16.
The loss of the call sites' state in the forward of a reused nested_compile_region is not
reported there. Seen on torch 2.13.0 cpu, 2.14.1 and 2.15.0 (the third on 2.13.0 and 2.15.0).

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


@torch.compiler.nested_compile_region
def b(p, q):
    return torch.bmm(p, q)


@torch.autocast("cpu", dtype=torch.float16)
def m(p, q):
    b(p, q)
    return b(p, q)


x, w = torch.randn(8, 16), torch.randn(16, 4, requires_grad=True)
y = torch.randn(4, 8, dtype=torch.bfloat16, requires_grad=True)
t = torch.randint(0, 2, (4, 8)).to(torch.bfloat16)
p = torch.randn(2, 8, 16, dtype=torch.bfloat16, requires_grad=True)
q = torch.randn(2, 16, 4, dtype=torch.bfloat16, requires_grad=True)
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
print("no region around the compiled call, a float16 region around the calls, eager:", m(p, q).dtype)
for backend in ("eager", "aot_eager", "inductor"):
    torch._dynamo.reset()
    print(f"torch.compile(backend={backend!r}):", torch.compile(m, backend=backend)(p, q).dtype)
torch._dynamo.reset()
with torch.no_grad():
    print("aot_eager under no_grad:", torch.compile(m, backend="aot_eager")(p, q).dtype)
functorch_config.backward_pass_autocast = "off"
for name, fn, args, outer in (
    ("in the body", f, (x, w), True),
    ("around the calls", k, (y, t), True),
    ("float16 around the calls, none around the compiled call", m, (p, q), False),
):
    torch._dynamo.reset()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=outer):
        got = torch.compile(fn, backend="aot_eager")(*args).dtype
    print(f"backward_pass_autocast='off', region {name}, aot_eager:", got)

"""A compile that fails inside an autocast region leaves autocast's nesting counter incremented
(the region entered while tracing is never exited), so the weight-cast cache is never cleared
again. Seen on torch 2.13.0 cpu; no public report found.

Run: python docs/findings/failed-compile-leaks-nesting.py (torch only)."""

import torch


def nesting():
    n = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return n


def f(p, a, b):
    with torch.autocast("cpu", dtype=torch.float16):

        def branch(a, b):
            with torch.autocast("cpu", enabled=False):
                return (torch.cat([a, b], 1),)  # promote; eager: autocast off, float32

        return torch.cond(p > 0, branch, branch, (a, b))


p, a, b = torch.tensor(1.0), torch.randn(2, 3, dtype=torch.bfloat16), torch.randn(2, 5)
print(
    "eager:", f(p, a, b)[0].dtype, "| nesting after:", nesting(), "enabled:", torch.is_autocast_enabled("cpu")
)
for backend in ("aot_eager", "inductor"):
    torch._dynamo.reset()
    try:
        print(backend, torch.compile(f, backend=backend)(p, a, b)[0].dtype)
    except Exception as e:
        print(backend, "raised:", [line for line in str(e).splitlines() if "Error" in line][:1])
    print(
        "  nesting after:",
        nesting(),
        "enabled:",
        torch.is_autocast_enabled("cpu"),
        "dtype:",
        torch.get_autocast_dtype("cpu"),
    )

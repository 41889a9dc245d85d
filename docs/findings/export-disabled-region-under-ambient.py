"""Under a region around the call, a nested enabled=False region is not honoured by strict export
and by run_decompositions(); run_decompositions() does not honour a nested region of another
dtype either (bfloat16 under float16: mm float16, eager bfloat16). Seen on torch 2.13.0, 2.14.1
and 2.15.0 cpu; no public report found.

The last lines: flex_attention in a bfloat16 region, exported and decomposed outside any region
(strict and non-strict), then called under a float16 region: float16, eager bfloat16 (seen on
2.13.0 and 2.15.0; met by program 91 of the 2.13.0 non-strict decomposed draw).

Run: python docs/findings/export-disabled-region-under-ambient.py (torch only)."""

import torch
from torch.nn.attention.flex_attention import flex_attention


def f(a, b):
    with torch.autocast("cpu", enabled=False):
        return torch.stack([a, b])  # a promote op on CPU; mm shows the same below


def g(a, b):
    with torch.autocast("cpu", enabled=False):
        return torch.mm(a, b)


def h(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return torch.mm(a, b)


class M(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, a, b):
        return self.fn(a, b)


a = torch.randn(4, 4, dtype=torch.bfloat16)
b = torch.randn(4, 4)
x, y = torch.randn(4, 4), torch.randn(4, 4)
with torch.autocast("cpu", dtype=torch.float16):
    print("eager stack:", f(a, b).dtype, " eager mm:", g(x, y).dtype, " eager bfloat16 mm:", h(x, y).dtype)
    for strict in (True, False):
        for dec in (False, True):
            for fn, args, name in ((f, (a, b), "stack"), (g, (x, y), "mm"), (h, (x, y), "bfloat16 mm")):
                try:
                    ep = torch.export.export(M(fn), args, strict=strict)
                    if dec:
                        ep = ep.run_decompositions()
                    out = ep.module()(*args).dtype
                except Exception as e:
                    out = f"raised {type(e).__name__}: {str(e).splitlines()[0][:80]}"
                print(f"strict={strict} decomposed={dec} {name}: {out}")


class Flex(torch.nn.Module):
    def forward(self, q, k, v):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return flex_attention(q, k, v)


q = torch.randn(1, 1, 8, 4)
for strict in (True, False):
    decomposed = torch.export.export(Flex(), (q, q, q), strict=strict).run_decompositions().module()
    with torch.autocast("cpu", dtype=torch.float16):
        eager, got = Flex()(q, q, q).dtype, decomposed(q, q, q).dtype
    print(f"strict={strict} flex_attention, decomposed outside, called under float16: {got} (eager {eager})")

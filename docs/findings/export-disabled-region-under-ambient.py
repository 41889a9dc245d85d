"""Under a region around the call, a nested enabled=False region is not honoured by strict export
and by run_decompositions(); run_decompositions() does not honour a nested region of another
dtype either (bfloat16 under float16: mm float16, eager bfloat16). Seen on torch 2.13.0, 2.14.1
and 2.15.0 cpu; no public report found.

Run: python docs/findings/export-disabled-region-under-ambient.py (torch only)."""

import torch


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

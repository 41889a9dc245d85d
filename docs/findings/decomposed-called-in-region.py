"""A decomposed exported program called inside an autocast region is autocast again: the caller's
region overrides the program's own (float16 becomes bfloat16). Seen on torch 2.13.0 cpu; no public
report found.

Run: python docs/findings/decomposed-called-in-region.py (torch only)."""

import torch


def f(a, b):
    with torch.autocast("cpu", dtype=torch.float16):
        return torch.mm(a, b)


class M(torch.nn.Module):
    def forward(self, a, b):
        return f(a, b)


a, b = torch.randn(8, 16), torch.randn(16, 4)
for strict in (True, False):
    ep = torch.export.export(M(), (a, b), strict=strict)
    dec = ep.run_decompositions()  # exported and decomposed outside any region
    with torch.autocast("cpu", dtype=torch.bfloat16):  # called inside a region
        eager, module, decomposed = f(a, b).dtype, ep.module()(a, b).dtype, dec.module()(a, b).dtype
        print(f"strict={strict}: eager {eager}, ep.module() {module}, decomposed {decomposed}")

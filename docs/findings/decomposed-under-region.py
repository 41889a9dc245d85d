"""run_decompositions() called inside an autocast region bakes that region's casts into the
decomposed program, which has no region of its own: called outside any region it still runs
bmm in bfloat16 (eager: float32). torch.export.export inside the region does not: decomposed
outside, the same program runs float32. Seen on torch 2.13.0 and 2.15.0 cpu, strict and
non-strict; no public report found.

Run: python docs/findings/decomposed-under-region.py (torch only)."""

import torch


class M(torch.nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)  # no autocast region in the program


a, b = torch.randn(2, 8, 16), torch.randn(2, 16, 4)
print(f"eager, outside any region: {M()(a, b).dtype}")
for strict in (True, False):
    ep = torch.export.export(M(), (a, b), strict=strict)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under = ep.run_decompositions()  # decomposed inside a region
        exported_under = torch.export.export(M(), (a, b), strict=strict)
    outside = exported_under.run_decompositions()  # exported inside, decomposed outside
    with torch.no_grad():
        print(
            f"strict={strict}: decomposed in the region, called outside: {under.module()(a, b).dtype}; "
            f"exported in it, decomposed outside: {outside.module()(a, b).dtype}"
        )

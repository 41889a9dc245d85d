"""A program exported and decomposed (run_decompositions()) outside any autocast region, then called
inside one: an op that autocast lists but that the decomposition turns into ops it does not list
is not cast. conv2d becomes aten::convolution and runs float32 (eager, and ep.module() without the
decomposition: float16); mm, which the decomposition keeps, is cast. Strict and non-strict export;
seen on torch 2.13.0 and 2.15.0 cpu; no public report found. Met by program 150 of the 2.13.0
export-nonstrict-decomposed draw (conv3d on its second call, under a float16 region), judged by
benchmarks/campaign_programs.py --judge; benchmarks/scan_hop_ops.py --hop called lists the ops.

Run: python docs/findings/decomposed-loses-call-region.py (torch only)."""

import torch


class M(torch.nn.Module):
    def forward(self, x, w):
        return torch.conv2d(x, w), torch.mm(x[0, 0], w[0, 0])


x, w = torch.randn(1, 2, 4, 4), torch.randn(3, 2, 4, 4)
for strict in (True, False):
    ep = torch.export.export(M(), (x, w), strict=strict)
    decomposed = ep.run_decompositions()  # outside any region
    ops = sorted({str(n.target) for n in decomposed.graph.nodes if n.op == "call_function"})
    with torch.autocast("cpu", dtype=torch.float16):  # called inside one
        for name, fn in (("eager", M()), ("ep.module()", ep.module()), ("decomposed", decomposed.module())):
            conv, mm = fn(x, w)
            print(f"strict={strict} {name}: conv2d {conv.dtype}, mm {mm.dtype}")
    print(f"strict={strict} the decomposed program's ops: {ops}")

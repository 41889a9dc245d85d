"""Strict torch.export cannot trace a lower_precision_fp op on mixed bfloat16/float32 inputs inside
an autocast region (its meta kernel sees the uncast inputs); non-strict export can. Seen on torch
2.13.0 cpu; no public report found.

Run: python docs/findings/strict-export-mixed-inputs.py (torch only)."""

import torch


def f(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return torch.bmm(a, b)


class M(torch.nn.Module):
    def forward(self, a, b):
        return f(a, b)


a = torch.randn(2, 8, 16, dtype=torch.bfloat16)
b = torch.randn(2, 16, 4)
print("eager:", f(a, b).dtype)
for strict in (True, False):
    try:
        ep = torch.export.export(M(), (a, b), strict=strict)
        print("strict" if strict else "non-strict", "ep.module():", ep.module()(a, b).dtype)
    except Exception as e:
        print(
            "strict" if strict else "non-strict",
            "export raised:",
            type(e).__name__,
            str(e).splitlines()[0][:120],
        )
with torch.no_grad():
    try:
        ep = torch.export.export(M(), (a, b), strict=True)
        print("strict under no_grad:", ep.module()(a, b).dtype)
    except Exception as e:
        print("strict under no_grad raised:", type(e).__name__, str(e).splitlines()[0][:120])

"""torch.compile of a torch.cond whose branch has its own autocast region, called inside another
region, raises while compiling when the branch holds a promote op (cat). Seen on torch 2.13.0 cpu;
no public report found. torch.export (strict and non-strict), made inside the region around the
call as a user exports where the model runs, raises the same while tracing (2.13.0 and 2.15.0; met
by the suite's verdict on the 2.13.0 non-strict export draw, programs 112 to 114, 2026-11-28).

Run: python docs/findings/cond-branch-region-under-ambient.py (torch only)."""

import torch


@torch.autocast("cpu", dtype=torch.bfloat16)
def decorated(a, b):
    return torch.cat([a, b])  # promote on CPU: bfloat16 inputs under bfloat16 autocast


def with_block(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return torch.cat([a, b])


def make(inner):
    def f(p, a, b):
        def branch(a, b):
            return (inner(a, b),)

        return torch.cond(p > 0, branch, branch, (a, b))

    return f


p, a, b = torch.tensor(1.0), torch.randn(2, 3, dtype=torch.bfloat16), torch.randn(4, 3, dtype=torch.bfloat16)
for name, inner in (("decorated", decorated), ("with", with_block)):
    f = make(inner)
    with torch.autocast("cpu", dtype=torch.float16):  # a region around the call
        try:
            print(name, "eager:", f(p, a, b)[0].dtype)
        except Exception as e:
            print(name, "eager raised:", str(e).splitlines()[0])
        for backend in ("aot_eager", "inductor"):
            torch._dynamo.reset()
            try:
                print(name, backend, torch.compile(f, backend=backend)(p, a, b)[0].dtype)
            except Exception as e:
                print(name, backend, "raised:", [line for line in str(e).splitlines() if "Error" in line][:1])


class M(torch.nn.Module):
    def forward(self, p, a, b):
        return make(decorated)(p, a, b)


with torch.autocast("cpu", dtype=torch.float16):  # exported where it runs: inside the region
    for strict in (True, False):
        try:
            ep = torch.export.export(M(), (p, a, b), strict=strict)
            print(f"decorated torch.export strict={strict}:", ep.module()(p, a, b)[0].dtype)
        except Exception as e:
            print(f"decorated torch.export strict={strict} raised:", str(e).splitlines()[0][:90])

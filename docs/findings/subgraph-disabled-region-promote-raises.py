"""A reused torch.compiler.nested_compile_region whose body holds an enabled=False region around a
promote op (cat of a bfloat16 parameter and a float32 tensor), called inside a float16 region:
torch.compile (aot_eager, inductor) raises prioritize's error while AOTAutograd traces the body
("Unexpected floating ScalarType in at::autocast::prioritize"), in grad mode and under no_grad
alike; eager runs the cat uncast (float32), and backend="eager" too. The body's disabled region
is not honoured where AOTAutograd traces it (F9's family, but a raise, and without gradients
too). Seen on torch 2.13.0 and 2.15.0 cpu; no public report found. Met by program 161 of the
2.15.0 inductor campaign (part 1 of 2), judged undeclared by campaign_programs.py --judge.
Non-strict torch.export raises the same while tracing; strict export runs it as eager (2.13.0 and
2.15.0; met by the suite's verdict on the 2.15.0 non-strict export draw, programs 158 to 162).

Each region is called twice: torch.compile inlines a nested_compile_region called once.

Run: python docs/findings/subgraph-disabled-region-promote-raises.py (torch only)."""

import torch


@torch.compiler.nested_compile_region
def h(a, w):
    with torch.autocast("cpu", enabled=False):
        return torch.cat([w, a])


def f(a, w):
    with torch.autocast("cpu", dtype=torch.float16):
        h(a, w)
        return h(a, w)


a = torch.randn(2, 3)
w = torch.nn.Parameter(torch.randn(2, 3, dtype=torch.bfloat16))
print("eager:", f(a, w).dtype)
for grad in (True, False):
    for backend in ("eager", "aot_eager", "inductor"):
        torch._dynamo.reset()
        with torch.set_grad_enabled(grad):
            try:
                got = str(torch.compile(f, backend=backend)(a, w).dtype)
            except Exception as e:  # BackendCompilerFailed: its second line is what the backend raised
                lines = str(e).strip().splitlines()
                got = f"raises {type(e).__name__}: {lines[min(1, len(lines) - 1)][:90]}"
        print(f"grad={grad} torch.compile(backend={backend!r}): {got}")


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = w

    def forward(self, a):
        return f(a, self.w)


for strict in (True, False):
    try:
        got = str(torch.export.export(M(), (a,), strict=strict).module()(a).dtype)
    except Exception as e:
        got = f"raises {type(e).__name__}: {str(e).strip().splitlines()[0][:90]}"
    print(f"torch.export strict={strict}: {got}")

"""Inside an autocast region, an op that autocast does not list and that decomposes into ops it
does, called in a torch.cond branch, runs float32 through torch.compile's AOTAutograd backends
(eager: the region's dtype); a listed op in the same branch (mm) is cast. With and without
gradients (F10's needs none). F10's loss (a reused nested_compile_region's body) in another higher-order op's
body. Found by the full certification's generated program p00cd266618 on 2.13.0 (tensordot in a
torch.cond branch under a legacy torch.cpu.amp.autocast region); seen on torch 2.13.0, 2.14.1
and 2.15.0 cpu; no public report found.

Run: python docs/findings/cond-branch-composite-under-region.py (torch only)."""

import torch

a, b, x, w, h = (torch.randn(s) for s in ((4, 6, 8), (8, 6, 3), (3, 4), (4, 5), (3, 5)))
UNLISTED = {
    "tensordot": lambda: torch.tensordot(a, b, dims=[[1, 2], [1, 0]]),
    "einsum": lambda: torch.einsum("ij,jk->ik", x, w),
    "chain_matmul": lambda: torch.chain_matmul(x, w, w.t()),
    "linalg.multi_dot": lambda: torch.linalg.multi_dot([x, w, w.t()]),
    "rnn_tanh_cell": lambda: torch.rnn_tanh_cell(x, h, torch.randn(5, 4), torch.randn(5, 5)),
    "rnn_relu_cell": lambda: torch.rnn_relu_cell(x, h, torch.randn(5, 4), torch.randn(5, 5)),
    "mm (listed)": lambda: torch.mm(x, w),
}


def program(op):
    def f(p):
        with torch.autocast("cpu", dtype=torch.bfloat16):

            def branch():
                return (op(),)

            return torch.cond(p > 0, branch, branch, ())

    return f


p = torch.tensor(1.0)
print("torch", torch.__version__)
for grad in (False, True):  # True: the op's inputs require grad
    for t in (a, b, x, w, h):
        t.requires_grad_(grad)
    for name, op in UNLISTED.items():
        f = program(op)
        with torch.set_grad_enabled(grad):
            eager = f(p)[0].dtype
            seen = []
            for backend in ("eager", "aot_eager", "inductor"):
                torch._dynamo.reset()
                seen.append(f"{backend} {torch.compile(f, backend=backend)(p)[0].dtype}")
        print(f"grad={grad} {name}: eager {eager}; " + ", ".join(seen))

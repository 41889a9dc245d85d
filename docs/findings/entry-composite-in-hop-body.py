"""Inside an autocast region, an op that autocast lists as float32, called through a Python entry
point that enters a composite op autocast does not list (torch.nn.functional.pad with mode
"reflect" or "replicate": aten::pad; torch.nn.functional.nll_loss: aten::nll_loss_nd), runs in
the input's dtype in the body of a higher-order op through torch.compile's AOTAutograd backends
(a torch.cond branch; a reused nested_compile_region), eager float32: the body's decomposition
of the composite is traced uncast (F10 and F13, for ops autocast lists). The same ops called as
aten overloads are cast, and so is the entry point outside a higher-order op. Found by the
generated program p8de82a19bf (F.pad in a torch.cond branch, under a bfloat16 region around the
call) once a seed drew the same programs whatever was imported; the seven ops by
benchmarks/scan_hop_ops.py (--inputs lower); no public report found.

Run: python docs/findings/entry-composite-in-hop-body.py (torch only)."""

import torch
import torch.nn.functional as F

x1, x2, x3 = (torch.randn(s, dtype=torch.bfloat16) for s in ((2, 3, 6), (1, 2, 5, 5), (1, 2, 4, 4, 4)))
logits, target = torch.randn(4, 5, dtype=torch.bfloat16), torch.tensor([0, 1, 2, 3])
CALLS = {
    "F.pad reflect 1d": lambda: F.pad(x1, [2, 1], mode="reflect"),
    "F.pad reflect 2d": lambda: F.pad(x2, [1, 1, 1, 1], mode="reflect"),
    "F.pad replicate 1d": lambda: F.pad(x1, [2, 1], mode="replicate"),
    "F.pad replicate 3d": lambda: F.pad(x3, [1, 1, 1, 1, 1, 1], mode="replicate"),
    "F.nll_loss": lambda: F.nll_loss(logits, target),
    "aten.reflection_pad1d (listed, called as the overload)": lambda: torch.ops.aten.reflection_pad1d(
        x1, [2, 1]
    ),
}


def in_cond(call):
    def f(p):
        def branch():
            return (call().contiguous(),)

        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.cond(p > 0, branch, branch, ())

    return f


def in_subgraph(call):
    body = torch.compiler.nested_compile_region(lambda: (call(),))

    def f(p):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            body()  # a region called once is inlined
            return body()

    return f


def outside(call):
    def f(p):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return (call(),)

    return f


p = torch.tensor(1.0)
print("torch", torch.__version__)
WHERE = (("cond branch", in_cond), ("nested_compile_region", in_subgraph), ("no hop", outside))
with torch.no_grad():
    for where, wrap in WHERE:
        for name, call in CALLS.items():
            f = wrap(call)
            eager = f(p)[0].dtype
            seen = []
            for backend in ("eager", "aot_eager", "inductor"):
                torch._dynamo.reset()
                seen.append(f"{backend} {torch.compile(f, backend=backend)(p)[0].dtype}")
            print(f"{where}: {name}: eager {eager}; " + ", ".join(seen))

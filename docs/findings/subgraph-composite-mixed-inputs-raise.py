"""Under a region around the call, an op that autocast does not list and that decomposes into
matrix products autocast casts (lstm_cell: two linears), inside a reused
torch.compiler.nested_compile_region (invoke_subgraph), called on inputs of mixed dtypes, makes
torch.compile's AOTAutograd backends raise at the call: the body's decomposition is traced uncast,
so its matrix product meets bfloat16 and float32 inputs (eager casts both to the region's dtype
and returns float32). It is F10 (subgraph-composite-under-ambient.py) where the inputs' dtypes
differ: without gradients only; with gradients, called once (inlined) or with backend="eager",
it runs as eager does. The message depends on the matrix product that raises: the generated
program's lstm_cell with biases gave "mat1 and mat2 must have the same dtype, but got Float and
BFloat16". Without a region eager raises too: the inputs need the region's casts. Seen on torch
2.13.0, 2.14.1 and 2.15.0 cpu; no public report found.

Run: python docs/findings/subgraph-composite-mixed-inputs-raise.py (torch only)."""

import torch


@torch.compiler.nested_compile_region
def h(x, hx, cx, w_ih, w_hh):
    return torch.lstm_cell(x, (hx, cx), w_ih, w_hh)


def f(*args):
    h(*args)  # a second call site: a region called once is inlined
    return h(*args)[0]


g = torch.Generator().manual_seed(0)
x = torch.randn(3, 4, generator=g, dtype=torch.bfloat16)
hx, cx = torch.randn(3, 5, generator=g), torch.randn(3, 5, generator=g)
w_ih, w_hh = torch.randn(20, 4, generator=g), torch.randn(20, 5, generator=g)
for grad in (False, True):
    w_ih.requires_grad_(grad)
    with torch.autocast("cpu", dtype=torch.float16):
        print(f"an input requires grad: {grad}; eager:", f(x, hx, cx, w_ih, w_hh).dtype)  # float32
        for backend in ("eager", "aot_eager", "inductor"):
            torch._dynamo.reset()
            try:
                got = str(torch.compile(f, backend=backend)(x, hx, cx, w_ih, w_hh).dtype)
            except RuntimeError as e:
                got = f"raises {type(e).__name__}: {str(e).splitlines()[0]}"
            print(f"  torch.compile(backend={backend!r}):", got)

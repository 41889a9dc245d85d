"""Under a region around the call, an op that autocast does not list and that decomposes into
ops it does (einsum, tensordot, chain_matmul, linalg.multi_dot, rnn_tanh_cell, rnn_relu_cell),
inside a reused torch.compiler.nested_compile_region (invoke_subgraph), runs float32 through
torch.compile's AOTAutograd backends (eager: the region's dtype). Dynamo's graph says float16;
AOTAutograd traces the body's decomposition uncast. Without gradients only (no input requires
grad, or under no_grad or inference_mode; with gradients it is cast, as eager); a listed op in the
same body (mm) is cast; the region called once (inlined) or backend="eager" is as eager. Seen on
torch 2.13.0, 2.14.1 and 2.15.0 cpu; no public report found.

Run: python docs/findings/subgraph-composite-under-ambient.py (torch only)."""

import torch


@torch.compiler.nested_compile_region
def h(a, b, x, w):
    return torch.einsum("ij,jk->ik", a, b), torch.mm(x, w)


def f(a, b, x, w):
    h(a, b, x, w)  # a second call site: a region called once is inlined
    return h(a, b, x, w)


args = torch.randn(3, 4), torch.randn(4, 5), torch.randn(3, 4), torch.randn(4, 5)
with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
    print("eager (einsum, mm):", [t.dtype for t in f(*args)])  # float16, float16
    for backend in ("eager", "aot_eager", "inductor"):
        torch._dynamo.reset()
        out = torch.compile(f, backend=backend)(*args)
        print(f"torch.compile(backend={backend!r}):", [t.dtype for t in out])

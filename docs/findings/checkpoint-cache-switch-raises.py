"""torch.set_autocast_cache_enabled() inside a function run by torch.utils.checkpoint, compiled
with torch.compile (any backend, backend="eager" too), raises InternalTorchDynamoError
"TypeError: torch.utils._pytree.arg_tree_leaves() argument after ** must be a mapping, not
NoneType" while Dynamo traces the checkpoint; eager runs it. Inside or outside an autocast
region, with or without gradients. Another global setter in the same place
(torch.set_num_threads) compiles. Seen on torch 2.13.0, 2.14.1 and 2.15.0 cpu; no public report
found.

Run: python docs/findings/checkpoint-cache-switch-raises.py (torch only)."""

import torch


def block(x, w):
    y = x @ w
    torch.set_autocast_cache_enabled(False)
    return y


def f(x, w):
    return torch.utils.checkpoint.checkpoint(block, x, w, use_reentrant=False)


x, w = torch.randn(4, 4), torch.randn(4, 4)
with torch.autocast("cpu", dtype=torch.bfloat16):
    print("eager:", f(x, w).dtype)  # bfloat16
    torch.set_autocast_cache_enabled(True)
    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        try:
            print(f"torch.compile(backend={backend!r}):", torch.compile(f, backend=backend)(x, w).dtype)
        except Exception as e:
            print(f"torch.compile(backend={backend!r}): raises {type(e).__name__}: {str(e).splitlines()[0]}")
        torch.set_autocast_cache_enabled(True)

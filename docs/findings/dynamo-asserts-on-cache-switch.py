"""A cache switch inside a cache_enabled=False region makes Dynamo assert "Global
autocast_cache_enabled state changed while dynamo tracing, please report a bug", and the failed
call leaves the flag changed. Seen on torch 2.13.0 cpu; no public report found (known bug
dynamo-asserts-on-cache-switch).

Run: python docs/findings/dynamo-asserts-on-cache-switch.py (torch only)."""

import torch


def f():
    with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False):
        torch.set_autocast_cache_enabled(False)
    return torch.ones(1)


f()
print("eager: cache enabled after:", torch.is_autocast_cache_enabled())
try:
    torch.compile(f, backend="aot_eager")()
except Exception as e:
    print("compiled raised:", type(e).__name__, str(e).splitlines()[0][:150])
print("cache enabled after the compiled call:", torch.is_autocast_cache_enabled())

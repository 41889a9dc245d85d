"""Calls of the same ops with tensors of different dtypes, for the reference's plan memo."""

from __future__ import annotations

from collections.abc import Callable

import torch


def mixed_calls() -> list[Callable[[], torch.Tensor]]:
    """The same ops called with tensors of different dtypes: each kind of call its own plan
    (lower precision, untouched float64, promotion through a list, non-tensor arguments)."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(2, 8, generator=g), torch.randn(4, 8, generator=g)
    img, k = torch.randn(1, 2, 6, 6, generator=g), torch.randn(2, 2, 3, 3, generator=g)
    kinds = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.float64, torch.float32]
    F = torch.nn.functional
    calls = [lambda d=d: F.linear(x.to(d), w.to(d)) for d in kinds]
    calls += [lambda d=d: F.conv2d(img.to(d), k.to(d), None, 2) for d in kinds]
    calls += [lambda a=a, b=b: torch.cat([x.to(a), x.to(b)]) for a in kinds[:3] for b in kinds[:3]]
    return calls

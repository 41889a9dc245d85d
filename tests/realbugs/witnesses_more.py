"""More witnesses (registered in :data:`realbugs.witnesses.WITNESSES`), one per entry of
``replays_more``: the dtype an op gives under autocast, or the error it raises.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .witnesses import cpu_autocast, fake_cuda_autocast, name, observe, witness


@witness
def conv_transpose_dtype() -> Any:
    with cpu_autocast():
        return observe(lambda: name(F.conv_transpose1d(torch.randn(1, 2, 5), torch.randn(2, 3, 3)).dtype))


@witness
def cpu_loss_dtype() -> Any:
    a, b = torch.randn(4, dtype=torch.bfloat16), torch.randn(4, dtype=torch.bfloat16)
    with cpu_autocast():
        return [name(F.l1_loss(a, b).dtype), name(F.smooth_l1_loss(a, b).dtype)]


@witness
def softmax_half_input() -> Any:
    with fake_cuda_autocast():
        x = torch.empty(2, 8, device="cuda", dtype=torch.float16)
        return observe(lambda: name(torch.softmax(x, -1).dtype))


@witness
def pow_half_input() -> Any:
    with fake_cuda_autocast():
        x = torch.empty(5, 5, device="cuda", dtype=torch.float16)
        return observe(lambda: name(x.pow(2).dtype))


@witness
def index_put_mixed() -> Any:
    with fake_cuda_autocast():
        x = torch.empty(4, 3, device="cuda", dtype=torch.float16)
        values = torch.empty(2, 3, device="cuda")  # float32: the widest input
        idx = torch.tensor([0, 2], device="cuda")
        return observe(lambda: name(torch.index_put(x, (idx,), values).dtype))


@witness
def scatter_add_mixed() -> Any:
    with fake_cuda_autocast():
        x = torch.empty(2, 3, device="cuda")
        src = torch.empty(2, 3, device="cuda", dtype=torch.float16)
        idx = torch.zeros(2, 3, dtype=torch.int64, device="cuda")
        return observe(lambda: name(torch.scatter_add(x, 0, idx, src).dtype))


@witness
def addmm_activation_mixed() -> Any:
    bias, mat1, mat2 = torch.randn(3), torch.randn(2, 4, dtype=torch.bfloat16), torch.randn(4, 3)
    with cpu_autocast():
        return observe(lambda: name(torch._addmm_activation(bias, mat1, mat2).dtype))

"""Real models, forward and backward, under reference_impl.autocast vs torch.autocast.

Same output dtypes, same gradient dtypes, bitwise-equal values (the same CPU
kernels run on the same casts), and the same number of casts
(``aten::_to_copy`` counted with a dispatch mode, forward and backward apart).
Two small models written here, and six tiny Hugging Face architectures built from
configs (``benchmarks/hf_models.py``: BERT, GPT-2, Llama, T5, ViT, ConvNeXt), which
are skipped when ``transformers`` is not installed (``pip install -e ".[bench]"``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from helpers.hf_helpers import HF_MODELS, hf_models
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import reference_impl
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.compare import output_mismatch


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.head = nn.Linear(16 * 2 * 2, 10)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = F.relu(self.bn(self.conv1(x)))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        logits = self.head(x.flatten(1))
        return logits, F.cross_entropy(logits, target)


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block: layer norm, attention (softmax), GELU MLP, CE loss."""

    def __init__(self, d: int = 32, heads: int = 4, classes: int = 7) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.head = nn.Linear(d, classes)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.ln1(x)
        a, weights = self.attn(h, h, h, need_weights=True)  # the softmax path, weights returned
        x = x + a
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        logits = self.head(x)
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten()) + weights.mean()
        return logits, loss


def make_cnn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(0)
    return SmallCNN(), (torch.randn(4, 3, 12, 12, generator=g), torch.randint(0, 10, (4,), generator=g))


def make_encoder() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    g = torch.Generator().manual_seed(0)
    return EncoderBlock(), (torch.randn(2, 6, 32, generator=g), torch.randint(0, 7, (2, 6), generator=g))


Forward = Callable[[], tuple[torch.Tensor, torch.Tensor]]  # one forward pass: (logits, loss)


def _small(
    make: Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]],
) -> Callable[[], tuple[nn.Module, Forward]]:
    def build() -> tuple[nn.Module, Forward]:
        model, inputs = make()
        return model, lambda: model(*inputs)

    return build


MODELS: dict[str, Callable[[], tuple[nn.Module, Forward]]] = {
    "small_cnn": _small(make_cnn),
    "encoder_block": _small(make_encoder),
}


def _hf(name: str) -> tuple[nn.Module, Forward]:
    model, inputs = hf_models().build(name)

    def forward() -> tuple[torch.Tensor, torch.Tensor]:
        out = model(**inputs)
        return out.logits, out.loss

    return model, forward


for _name in HF_MODELS:
    MODELS[_name] = lambda n=_name: _hf(n)


class CountToCopy(TorchDispatchMode):
    """Counts ``aten::_to_copy`` calls (the casts autocast makes)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is torch.ops.aten._to_copy.default:
            self.count += 1
        return func(*args, **(kwargs or {}))


@dataclass
class Run:
    logits: torch.Tensor
    loss: torch.Tensor
    grads: dict[str, torch.Tensor | None]
    forward_casts: int
    backward_casts: int


def run(name: str, region: Callable[[], contextlib.AbstractContextManager[Any]], steps: int = 2) -> Run:
    """``steps`` forward passes in one region (the weight cache is reused), then backward."""
    torch.manual_seed(0)
    model, forward = MODELS[name]()
    fwd, bwd = CountToCopy(), CountToCopy()
    with fwd, region():
        outs = [forward() for _ in range(steps)]
    logits = outs[-1][0]
    loss = sum(o[1] for o in outs)
    assert isinstance(loss, torch.Tensor)
    with bwd:
        loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    return Run(logits, loss, grads, fwd.count, bwd.count)


def _native(dtype: torch.dtype, cache: bool) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    return lambda: torch.autocast("cpu", dtype=dtype, cache_enabled=cache)


def _reference(dtype: torch.dtype, cache: bool) -> Callable[[], contextlib.AbstractContextManager[Any]]:
    return lambda: reference_impl.autocast("cpu", dtype=dtype, cache_enabled=cache)


@contextlib.contextmanager
def _no_region() -> Iterator[None]:
    yield


def compare(native: Run, ref: Run) -> list[str]:
    problems = []
    for what, n, r in (("logits", native.logits, ref.logits), ("loss", native.loss, ref.loss)):
        if (p := output_mismatch(n, r)) is not None:
            problems.append(f"{what}: {p}")
    for pname, ng in native.grads.items():
        rg = ref.grads[pname]
        if (ng is None) != (rg is None):
            problems.append(f"grad {pname}: None on one side only (native {ng is None}, ref {rg is None})")
        elif ng is not None and (p := output_mismatch(ng, rg)) is not None:
            problems.append(f"grad {pname}: {p}")
    if native.forward_casts != ref.forward_casts:
        problems.append(f"forward casts: native {native.forward_casts}, reference {ref.forward_casts}")
    if native.backward_casts != ref.backward_casts:
        problems.append(f"backward casts: native {native.backward_casts}, reference {ref.backward_casts}")
    return problems


CASES = [
    pytest.param(name, dtype, cache, id=f"{name}-{dtype}-{'cache' if cache else 'no_cache'}")
    for name in sorted(MODELS)
    for dtype in (torch.bfloat16, torch.float16)
    # The Hugging Face models run with the cache on only (the small ones cover it off), to keep time down.
    for cache in ((True,) if name in HF_MODELS else (True, False))
]


@pytest.mark.parametrize("name,dtype,cache", CASES)
def test_model_matches_native(name: str, dtype: torch.dtype, cache: bool) -> None:
    native = run(name, _native(dtype, cache))
    with reference_impl.trace_casts() as log:
        ref = run(name, _reference(dtype, cache))
    problems = compare(native, ref)
    assert not problems, (
        f"{name} {dtype} cache_enabled={cache}: reference differs from torch.autocast:\n  "
        + "\n  ".join(problems)
        + f"\nreproduce: pytest tests/test_models.py -k '{name} and {dtype_name(dtype)}'"
    )
    # The reference kernels made the casts (not native ones left in place): each copy is traced.
    # The Hugging Face models also cast tensors themselves (masks, norms in float32).
    copies = len(log.copies())
    assert 0 < copies <= ref.forward_casts if name in HF_MODELS else copies == ref.forward_casts, log
    # The comparison is not vacuous: autocast really changed the dtypes and made casts.
    assert native.logits.dtype != torch.float32 or name == "small_cnn"
    assert native.forward_casts > 0
    plain = run(name, _no_region)
    assert plain.logits.dtype == torch.float32
    assert plain.forward_casts < native.forward_casts if name in HF_MODELS else plain.forward_casts == 0


def test_weight_cache_saves_casts() -> None:
    """With the cache, the second forward pass reuses the weight casts (native and reference alike)."""
    with_cache = run("encoder_block", _reference(torch.bfloat16, True))
    without = run("encoder_block", _reference(torch.bfloat16, False))
    assert with_cache.forward_casts < without.forward_casts

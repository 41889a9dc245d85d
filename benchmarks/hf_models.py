"""Tiny real architectures from Hugging Face ``transformers``, built from configs with random weights.

Shared by ``benchmarks/bench_models.py`` (timing) and ``tests/test_models.py``
(correctness). Nothing is downloaded: every model is built from a config, and
its inputs are random tensors (token ids, pixel values, labels) of batch 2.
``transformers`` is optional (``pip install -e ".[bench]"``): importing this
module without it raises ImportError.

Each entry of :data:`MODELS` returns ``(model, inputs)``; ``model(**inputs).loss``
is a scalar training loss (the model computes it from ``labels``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import transformers
from torch import nn

transformers.logging.set_verbosity_error()  # config notes about unused defaults, not ours to fix

BATCH = 2
SEQ = 16
VOCAB = 128
HIDDEN = 32
IMAGE = 32

Built = tuple[nn.Module, dict[str, torch.Tensor]]


def _tokens(g: torch.Generator, vocab: int = VOCAB, seq: int = SEQ) -> torch.Tensor:
    return torch.randint(0, vocab, (BATCH, seq), generator=g)


def _text(g: torch.Generator) -> dict[str, torch.Tensor]:
    return {"input_ids": _tokens(g), "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)}


def _causal_lm(model: nn.Module) -> Built:
    """A decoder-only language model and its inputs: token ids, which are also its labels."""
    ids = _tokens(torch.Generator().manual_seed(0))
    return model, {"input_ids": ids, "labels": ids}


def _image_classifier(model: nn.Module, classes: int) -> Built:
    """An image classifier and its inputs: pixel values and class labels."""
    g = torch.Generator().manual_seed(0)
    return model, {
        "pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g),
        "labels": torch.randint(0, classes, (BATCH,), generator=g),
    }


def bert() -> Built:
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=4 * HIDDEN,
        max_position_embeddings=64,
        num_labels=3,
    )
    g = torch.Generator().manual_seed(0)
    return transformers.BertForSequenceClassification(config), {
        **_text(g),
        "labels": torch.randint(0, 3, (BATCH,), generator=g),
    }


def gpt2() -> Built:
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=64, n_embd=HIDDEN, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0
    )
    return _causal_lm(transformers.GPT2LMHeadModel(config))


def llama() -> Built:
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return _causal_lm(transformers.LlamaForCausalLM(config))


def t5() -> Built:
    config = transformers.T5Config(
        vocab_size=VOCAB,
        d_model=HIDDEN,
        d_kv=8,
        d_ff=2 * HIDDEN,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        decoder_start_token_id=0,
    )
    g = torch.Generator().manual_seed(0)
    return transformers.T5ForConditionalGeneration(config), {
        **_text(g),
        "labels": _tokens(g, seq=SEQ // 2),
    }


def vit() -> Built:
    config = transformers.ViTConfig(
        image_size=IMAGE,
        patch_size=8,
        hidden_size=HIDDEN,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=4 * HIDDEN,
        num_labels=5,
    )
    return _image_classifier(transformers.ViTForImageClassification(config), config.num_labels)


def convnext() -> Built:
    config = transformers.ConvNextConfig(
        num_channels=3,
        patch_size=4,
        hidden_sizes=[16, 32],
        depths=[1, 1],
        num_stages=2,
        num_labels=5,
        image_size=IMAGE,
    )
    return _image_classifier(transformers.ConvNextForImageClassification(config), config.num_labels)


MODELS: dict[str, Callable[[], Built]] = {
    "bert": bert,
    "gpt2": gpt2,
    "llama": llama,
    "t5": t5,
    "vit": vit,
    "convnext": convnext,
}


def build(name: str) -> Built:
    """``MODELS[name]()`` with torch's seed fixed (the same weights every time), in train mode
    with dropout off, so that two runs of the same model compute the same numbers."""
    torch.manual_seed(0)
    model, inputs = MODELS[name]()
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    return model.train(), inputs


def loss_of(model: nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
    loss: torch.Tensor = model(**inputs).loss
    return loss


def step(
    model: nn.Module, inputs: dict[str, Any], region: Callable[[], Any], clock: Callable[[], float]
) -> float:
    """The benchmarks' training step: forward and loss in ``region()``, backward after it; its time."""
    start = clock()
    with region():
        loss = loss_of(model, inputs)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return clock() - start


def unknown_names(models: str) -> str | None:
    """The ``--models`` error for a comma-separated list naming a model not in MODELS, else None."""
    unknown = [n for n in models.split(",") if n not in MODELS]
    return f"error: --models: unknown {unknown}; choose from {','.join(MODELS)}" if unknown else None

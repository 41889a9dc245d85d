"""The Hugging Face models of benchmarks/hf_models.py for the tests; skipped without transformers."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

# benchmarks/hf_models.py's models; its MODELS must list the same names (checked on import).
HF_MODELS = ("bert", "gpt2", "llama", "t5", "vit", "convnext")
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def hf_models() -> ModuleType:
    """benchmarks/hf_models.py; skips the calling test when transformers is not installed."""
    pytest.importorskip(
        "transformers", reason="the Hugging Face models need transformers: pip install -e '.[bench]'"
    )
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    import hf_models  # optional dependency: importable only where transformers is installed

    assert tuple(hf_models.MODELS) == HF_MODELS
    return hf_models

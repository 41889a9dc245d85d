"""The dtype vocabulary: the names the spec writes (``float16``, ``int64``...) and torch's dtypes.

The spec, the CLI and every message name dtypes as torch does without its ``torch.``
prefix; :func:`dtype_of` and :func:`dtype_name` translate both ways.
"""

from __future__ import annotations

import torch

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}

# The non-floating dtypes that stand for all of them where a rule exempts every
# non-floating input (rules.eligibility.floating_only): one integer type and bool.
NON_FLOATING: tuple[str, ...] = ("int64", "bool")


def dtype_of(name: str) -> torch.dtype:
    """``"bfloat16"`` -> ``torch.bfloat16``; an unknown name raises ValueError listing the known."""
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(DTYPES)}") from None


def dtype_name(dtype: torch.dtype | str) -> str:
    """``torch.bfloat16`` (or its text ``"torch.bfloat16"``) -> ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")

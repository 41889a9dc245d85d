"""Reference implementation of PyTorch autocast, driven by the spec in ``spec/``.

``autocast`` runs a whole program under the spec's policy (like ``torch.autocast``);
``trace_casts`` records every cast it makes. The policy engine
(:mod:`reference_impl.policy`) and the oracle (:mod:`reference_impl.oracle`) are
the per-op layers underneath.
"""

from __future__ import annotations

from typing import Any

__all__ = ["autocast", "trace_casts"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing autocast_spec (the loader, the CLI) does not import torch.
    if name == "autocast":
        from .reference_autocast import autocast

        return autocast
    if name == "trace_casts":
        from .trace import trace_casts

        return trace_casts
    raise AttributeError(f"module 'reference_impl' has no attribute {name!r}")

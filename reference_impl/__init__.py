"""Reference implementation of PyTorch autocast, driven by the spec in ``spec/``.

``autocast`` runs a whole program under the spec's policy (like ``torch.autocast``);
``trace_casts`` records every cast it makes. The policy engine
(:mod:`reference_impl.engine.policy`) and the oracle (:mod:`reference_impl.engine.oracle`) are
the per-op layers underneath. This package imports torch; the spec package it
reads, :mod:`autocast_spec`, does not.
"""

from __future__ import annotations

from .kernels.reference_autocast import autocast
from .kernels.trace import trace_casts

__all__ = ["autocast", "trace_casts"]

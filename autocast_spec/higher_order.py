"""Autocast kernels of higher-order operators (``torch.ops.higher_order.*``), registered in Python.

A higher-order operator (``flex_attention``) has no C++ schema: its Autocast kernel is a Python
function registered with ``HigherOrderOperator.py_impl(DispatchKey.Autocast<Device>)`` (torch
registers one for flex_attention at AutocastCPU and AutocastCUDA; torch_npu at
AutocastPrivateUse1 for flex_attention and flex_attention_backward). A device file states them
under ``higher_order_ops``: which operator, which of its leading arguments the kernel casts,
and to what (``lower_precision_fp``: to the autocast dtype; ``none``: passed on uncast).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .common import SourceLoc


@dataclass(frozen=True)
class HigherOrderKernel:
    """One higher-order operator's Python kernel at a device's Autocast key."""

    op: str  # the operator's name in torch.ops.higher_order, e.g. "flex_attention"
    policy: Literal["lower_precision_fp", "none"]  # the schema allows these two
    args: tuple[str, ...]  # its leading positional arguments the policy applies to, by name
    loc: SourceLoc
    note: str = ""

    @property
    def qualified(self) -> str:
        return f"higher_order::{self.op}"

"""Per-op kernel mutants: eligibility, numerics, promote, banned, explicit and appended
dtype arguments, autograd (wrong Autocast kernels for one op, hand-written or built from a
spec with a relaxed rule)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from autocast_spec.model import Policy

from .. import kernels as K
from .mutant import kernel_mutant


def _other_lower(t: torch.Tensor, lower: torch.dtype) -> torch.dtype | None:
    if not K.floating_on("cpu", t):
        return None
    return torch.float16 if lower == torch.bfloat16 else torch.bfloat16


def _to_lower(t: torch.Tensor, lower: torch.dtype) -> torch.dtype | None:
    return lower if K.floating_on("cpu", t) else None


def _relaxed(op: str, **rules: Any) -> Callable[[], None]:
    def install() -> None:
        K.spec_kernels(K.with_rules(K.bundled(), **rules), "cpu", [op])

    return install


def _device_blind_mode() -> None:
    """An autocast built above the dispatcher (a torch function mode), blind to devices:
    under CPU autocast it casts aten::mm's floating inputs on any device."""
    from torch.overrides import TorchFunctionMode

    targets = (torch.mm, torch.Tensor.mm, torch.ops.aten.mm.default)

    class DeviceBlindAutocast(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in targets and torch.is_autocast_enabled("cpu"):
                lower = torch.get_autocast_dtype("cpu")
                args = K.map_tensors(args, lambda t: t.to(lower) if t.is_floating_point() else t)
            return func(*args, **kwargs)

    DeviceBlindAutocast().__enter__()  # for the rest of the process (the main thread)


def _not_out_of_place(mutable_op: str, policy: Policy) -> Callable[[], None]:
    def install() -> None:
        spec = K.with_policy(K.with_rules(K.bundled(), out_of_place_only=False), "cpu", mutable_op, policy)
        K.spec_kernels(spec, "cpu", [mutable_op])

    return install


def _stack_to_first_dtype() -> None:
    op = torch.ops.aten.stack.default

    def kernel(tensors: list[torch.Tensor], dim: int = 0) -> torch.Tensor:
        first = tensors[0].dtype
        with K.below_autocast("cpu"):
            return op([t.to(first) if K.floating_on("cpu", t) else t for t in tensors], dim)

    K.register("aten::stack", kernel, "cpu")


def _banned_wrong_message() -> None:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("binary_cross_entropy is not supported here")

    K.register("aten::binary_cross_entropy", kernel, "cuda")


def _explicit_dtype_ignored() -> None:
    op = torch.ops.aten.softmax.int

    def kernel(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        with K.below_autocast("cuda"):
            return op(x, dim, dtype=torch.float32)

    K.register("aten::softmax.int", kernel, "cuda")


def _append_lower_dtype() -> None:
    info = K.bundled().op_info("aten::norm.Scalar")
    assert info is not None and info.append_dtype_target is not None
    target = K.op_overload(info.append_dtype_target)

    def kernel(x: torch.Tensor, p: Any = 2) -> torch.Tensor:
        with K.below_autocast("cuda"):
            return target(x, p, dtype=torch.get_autocast_dtype("cuda"))

    K.register("aten::norm.Scalar", kernel, "cuda")


def _detaching_casts() -> None:
    K.cast_kernel("aten::mm", "cpu", _to_lower, before=lambda t: t.detach())


OP_MUTANTS = [
    kernel_mutant(
        "wrong-lower-dtype",
        "op_policy",
        "aten::mm casts to the other lower dtype (float16 under bfloat16 autocast)",
        "cpu",
        "aten::mm",
        functools.partial(K.cast_kernel, "aten::mm", "cpu", _other_lower),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "float64-cast",
        "eligibility",
        "aten::mm casts float64 inputs too",
        "cpu",
        "aten::mm",
        _relaxed("aten::mm", never_cast=()),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "integer-cast",
        "eligibility",
        "aten::mm casts integer and bool inputs too",
        "cpu",
        "aten::mm",
        _relaxed("aten::mm", floating_only=False),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "other-device-cast",
        "eligibility",
        "autocast implemented as a torch function mode casts aten::mm's inputs on any device",
        "cpu",
        "aten::mm",
        _device_blind_mode,
        "lower_precision_fp",
    ),
    kernel_mutant(
        "inplace-autocast",
        "eligibility",
        "the in-place aten::addmm_ is autocast (lower_precision_fp)",
        "cpu",
        "aten::addmm",
        _not_out_of_place("aten::addmm_", Policy.LOWER_PRECISION_FP),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "out-autocast",
        "eligibility",
        "aten::mm.out (out=) is autocast (lower_precision_fp)",
        "cpu",
        "aten::mm",
        _not_out_of_place("aten::mm.out", Policy.LOWER_PRECISION_FP),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "set-opt-dtype-when-ineligible",
        "eligibility",
        "aten::softmax.int passes dtype=float32 even for float64 or integer inputs",
        "cuda",
        "aten::softmax.int",
        _explicit_dtype_ignored,
        "fp32_set_opt_dtype",
        files=("test_eligibility.py",),
    ),
    kernel_mutant(
        "wrong-numbers",
        "numerics",
        "aten::mm returns bfloat16 values scaled by 1 + 2**-7 (right dtype, wrong numbers)",
        "cpu",
        "aten::mm",
        functools.partial(K.cast_kernel, "aten::mm", "cpu", _to_lower, lambda out: out * (1 + 2**-7)),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "computed-in-float32",
        "numerics",
        "aten::mm computes in float32 and rounds the result (right dtype, other numbers)",
        "cpu",
        "aten::mm",
        functools.partial(
            K.cast_kernel, "aten::mm", "cpu", lambda t, lower: None, lambda out: out.to(torch.bfloat16)
        ),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "promote-to-first-input",
        "promote",
        "aten::stack casts every input to the first input's dtype instead of the widest",
        "cpu",
        "aten::stack",
        _stack_to_first_dtype,
        "promote",
    ),
    kernel_mutant(
        "banned-wrong-message",
        "banned",
        "aten::binary_cross_entropy raises, but not with the spec's message",
        "cuda",
        "aten::binary_cross_entropy",
        _banned_wrong_message,
        "banned",
    ),
    kernel_mutant(
        "explicit-dtype-ignored",
        "opt_dtype",
        "aten::softmax.int overrides an explicit dtype= with float32",
        "cuda",
        "aten::softmax.int",
        _explicit_dtype_ignored,
        "fp32_set_opt_dtype",
    ),
    kernel_mutant(
        "append-lower-dtype",
        "op_policy",
        "aten::norm.Scalar appends the autocast dtype instead of float32",
        "cuda",
        "aten::norm.Scalar",
        _append_lower_dtype,
        "fp32_append_dtype",
    ),
    kernel_mutant(
        "casts-detach-graph",
        "autograd",
        "aten::mm's casts detach its inputs from autograd (no gradients reach float32 leaves)",
        "cpu",
        "aten::mm",
        _detaching_casts,
        "lower_precision_fp",
    ),
]

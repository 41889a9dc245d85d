"""Op-list bugs: an op under the wrong policy, or without an Autocast kernel (AutocastCPU, CUDA's
promote list, torch_xla's lists), each replayed as a wrong Autocast kernel registered with
``torch.library`` (helpers from ``mutation.kernels``) as the report showed it, and its witness:
the dtype an op gives under autocast, or the error it raises."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from mutation import kernels as K

from autocast_spec.model import Policy

from .registry import OpLog, cpu_autocast, fake_cuda_autocast, name, observe, replay, witness

# --- replays ------------------------------------------------------------


@replay
def conv_tbc_in_fp32_list() -> None:
    """CPU listed aten::conv_tbc (which supports bfloat16) under fp32."""
    K.move("cpu", "aten::conv_tbc", Policy.FP32)


@replay
def sdpa_not_autocast() -> None:
    """MPS had no autocast for scaled_dot_product_attention: mixed q/k/v dtypes reach the kernel."""
    K.drop("cuda", "aten::scaled_dot_product_attention")


@replay
def einsum_not_autocast() -> None:
    """XLA's autocast lists left out einsum: it runs in float32 under autocast."""
    K.drop("cuda", "aten::einsum")


@replay
def layer_norm_not_autocast() -> None:
    """IPEX (XPU) did not autocast layer_norm: float16 weights meet float32 inputs."""
    K.drop("cuda", "aten::layer_norm")


@replay
def cat_not_promoting() -> None:
    """CPU autocast's cat kernel passed mixed float32/bfloat16 inputs on uncast (no aten::to)."""
    K.drop("cpu", "aten::cat")


_IN_TRANSFORM = threading.local()


@replay
def autocast_skipped_under_functorch() -> None:
    """MPS: inside torch.vmap / torch.func.grad the Autocast kernels leave lower_precision_fp
    ops (mm, bmm, ...) in float32; outside transforms they cast as the spec says."""
    from reference_impl.engine.torch_registry import dispatch_key
    from reference_impl.kernels.reference_autocast import op_kernel

    spec = K.bundled()
    dspec = spec.device("cpu")
    for op, entry in dspec.ops.items():
        if entry.policy is not Policy.LOWER_PRECISION_FP:
            continue
        cast = op_kernel(op, dspec, spec, dispatch_key(dspec.dispatch_key))
        target = K.op_overload(op)

        def kernel(*args: Any, _cast: Any = cast, _target: Any = target, **kwargs: Any) -> Any:
            if not getattr(_IN_TRANSFORM, "on", False):
                return _cast(*args, **kwargs)
            with K.below_autocast("cpu"):
                return _target(*args, **kwargs)

        K.register(op, kernel, "cpu")

    def transformed(orig: Callable[..., Any]) -> Callable[..., Any]:
        def make(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
            inner = orig(fn, *args, **kwargs)

            def call(*a: Any, **kw: Any) -> Any:
                _IN_TRANSFORM.on = True
                try:
                    return inner(*a, **kw)
                finally:
                    _IN_TRANSFORM.on = False

            return call

        return make

    torch.vmap = torch.func.vmap = transformed(torch.func.vmap)  # type: ignore[assignment]
    torch.func.grad = transformed(torch.func.grad)


@replay
def conv_transpose_in_fp32_list() -> None:
    """CPU listed conv_transpose1d/2d/3d (which support bfloat16) under fp32: they ran in float32."""
    for op in ("aten::conv_transpose1d", "aten::conv_transpose2d.input", "aten::conv_transpose3d.input"):
        K.move("cpu", op, Policy.FP32)


@replay
def cpu_loss_ops_not_autocast() -> None:
    """AutocastCPU had no fp32 kernel for loss operators: bfloat16 inputs gave bfloat16 losses."""
    for op in (
        "aten::l1_loss",
        "aten::smooth_l1_loss",
        "aten::huber_loss",
        "aten::soft_margin_loss",
        "aten::margin_ranking_loss",
        "aten::hinge_embedding_loss",
    ):
        K.drop("cpu", op)


@replay
def softmax_not_autocast() -> None:
    """XLA's autocast lists left out softmax: it ran in the lower precision, not float32."""
    K.drop("cuda", "aten::softmax.int")


@replay
def pow_not_autocast() -> None:
    """XLA's autocast lists left out pow: x.pow(2) of a bfloat16 tensor stayed in bfloat16."""
    for op in ("aten::pow.Tensor_Scalar", "aten::pow.Tensor_Tensor", "aten::pow.Scalar"):
        K.drop("cuda", op)


@replay
def index_put_not_promoting() -> None:
    """index_put was not on CUDA's promote list: float16/float32 self and values were not promoted
    (on a GPU: "Index put requires the source and destination dtypes match")."""
    K.drop("cuda", "aten::index_put")


@replay
def scatter_add_not_promoting() -> None:
    """scatter_add was not on CUDA's promote list: a float32 self with float16 src raised a
    dtype mismatch."""
    K.drop("cuda", "aten::scatter_add")


@replay
def addmm_activation_not_autocast() -> None:
    """AutocastCPU had no kernel for _addmm_activation (the fused linear of the native
    TransformerEncoderLayer path): bfloat16 and float32 operands raised "mat1 and mat2 must have
    the same dtype"."""
    K.drop("cpu", "aten::_addmm_activation")


# --- witnesses ----------------------------------------------------------


@witness
def conv_tbc_dtype() -> Any:
    with cpu_autocast():
        return observe(
            lambda: name(torch.conv_tbc(torch.randn(4, 2, 3), torch.randn(3, 3, 5), torch.randn(5)).dtype)
        )


@witness
def sdpa_mixed_inputs() -> Any:
    with fake_cuda_autocast():
        q, k = torch.empty(2, 4, 8, device="cuda"), torch.empty(2, 4, 8, device="cuda")
        v = torch.empty(2, 4, 8, device="cuda", dtype=torch.float16)
        return observe(lambda: name(F.scaled_dot_product_attention(q, k, v).dtype))


@witness
def einsum_dtype() -> Any:
    with fake_cuda_autocast():
        a, b = torch.empty(4, 8, device="cuda"), torch.empty(8, 3, device="cuda")
        return observe(lambda: name(torch.einsum("ij,jk->ik", a, b).dtype))


@witness
def layer_norm_half_inputs() -> Any:
    with fake_cuda_autocast():
        x = torch.empty(2, 4, device="cuda", dtype=torch.float16)
        w, b = (
            torch.empty(4, device="cuda", dtype=torch.float16),
            torch.empty(4, device="cuda", dtype=torch.float16),
        )
        return observe(lambda: name(F.layer_norm(x, (4,), w, b).dtype))


@witness
def cat_mixed_inputs_ops() -> Any:
    with cpu_autocast(), OpLog() as log:
        torch.cat([torch.ones(2), torch.ones(2, dtype=torch.bfloat16)])
    return log.ops


@witness
def vmap_mm_dtype() -> Any:
    w = torch.randn(4, 3)
    with cpu_autocast():
        return name(torch.vmap(torch.mm, in_dims=(0, None))(torch.randn(2, 5, 4), w).dtype)


@witness
def bilinear_wide_bias() -> Any:
    with fake_cuda_autocast():
        x1, x2 = torch.empty(2, 3, device="cuda"), torch.empty(2, 4, device="cuda")
        w = torch.empty(5, 3, 4, device="cuda", dtype=torch.float16)
        bias = torch.empty(5, device="cuda")  # float32: the widest input
        return observe(lambda: name(torch.bilinear(x1.half(), x2.half(), w, bias).dtype))


@witness
def promote_mixed_lower_dtypes() -> Any:
    with cpu_autocast():
        return observe(
            lambda: name(
                torch.stack([torch.ones(2, dtype=torch.float16), torch.ones(2, dtype=torch.bfloat16)]).dtype
            )
        )


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

"""More replays (registered in :data:`realbugs.replays.REPLAYS`): op-list bugs of AutocastCPU,
of CUDA's promote list and of torch_xla's lists, each a wrong Autocast kernel registered
with ``torch.library`` (helpers from ``mutation.kernels``) as the report showed it.
"""

from __future__ import annotations

from mutation import kernels as K

from autocast_spec.model import Policy

from .replays import replay


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

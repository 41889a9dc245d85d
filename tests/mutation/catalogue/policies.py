"""Policy and registration mutants: each op of a policy moved to every other policy, and
an op's Autocast kernel dropped or added (the reference's kernel built from a mutated spec)."""

from __future__ import annotations

import functools

from autocast_spec.model import Policy

from .. import kernels as K
from .mutant import Mutant, kernel_mutant

# (device, op, its policy): one op per policy, on the device that has the policy.
MOVE_SOURCES = (
    ("cpu", "aten::mm", Policy.LOWER_PRECISION_FP),
    ("cpu", "aten::cdist", Policy.FP32),
    ("cpu", "aten::index_copy", Policy.PROMOTE),
    ("cuda", "aten::softmax.int", Policy.FP32_SET_OPT_DTYPE),
    ("cuda", "aten::norm.Scalar", Policy.FP32_APPEND_DTYPE),
    ("cuda", "aten::binary_cross_entropy", Policy.BANNED),
)

# fp32_append_dtype needs an overload that takes the appended dtype; only the norm
# ops have one, and they are fp32_append_dtype already. Moving another op there is
# not a backend anyone can build, so the matrix leaves that column out.
UNREACHABLE_TARGETS = (Policy.FP32_APPEND_DTYPE,)

# Moves no observation of the op's results can tell apart from the spec, so no test can
# kill them: (op, moved to) -> why. They are listed, not counted.
EQUIVALENT = {
    ("aten::softmax.int", Policy.FP32): (
        "softmax(x.float()) and softmax(x, dtype=float32) give the same values, dtypes and gradients "
        "(the kernel converts its input to dtype first); an explicit dtype= is honoured by both"
    ),
}


def _moves() -> list[Mutant]:
    out = []
    for device, op, src in MOVE_SOURCES:
        for dst in Policy:
            if dst is src or dst in UNREACHABLE_TARGETS or (op, dst) in EQUIVALENT:
                continue
            out.append(
                kernel_mutant(
                    f"move-{device}-{op.removeprefix('aten::')}-to-{dst.value}",
                    "policy",
                    f"{op} ({src.value} on {device}) runs as {dst.value}",
                    device,
                    op,
                    functools.partial(K.move, device, op, dst),
                    src.value,
                )
            )
    return out


POLICY_MUTANTS = [
    *_moves(),
    kernel_mutant(
        "drop-cpu-conv2d",
        "registration",
        "aten::conv2d has no CPU autocast (its kernel only redispatches)",
        "cpu",
        "aten::conv2d",
        functools.partial(K.drop, "cpu", "aten::conv2d"),
        "lower_precision_fp",
    ),
    kernel_mutant(
        "drop-cuda-exp",
        "registration",
        "aten::exp has no CUDA autocast (runs in its input dtype)",
        "cuda",
        "aten::exp",
        functools.partial(K.drop, "cuda", "aten::exp"),
        "fp32",
    ),
    kernel_mutant(
        "add-cpu-relu",
        "registration",
        "aten::relu (not listed on cpu) gets a lower_precision_fp kernel",
        "cpu",
        "aten::relu",
        functools.partial(K.move, "cpu", "aten::relu", Policy.LOWER_PRECISION_FP),
        None,
    ),
    kernel_mutant(
        "add-cuda-linalg_inv",
        "registration",
        "aten::linalg_inv (not listed on cuda) gets an fp32 kernel",
        "cuda",
        "aten::linalg_inv",
        functools.partial(K.move, "cuda", "aten::linalg_inv", Policy.FP32),
        None,
    ),
]

"""What the reference autocast's tests share: the bundled spec, ops chosen by policy, the state read back."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from autocast_spec.model import Policy
from reference_impl.harness.samples import materialize, op_overload
from reference_impl.kernels import reference_dispatch
from reference_impl.kernels.reference_autocast import default_spec

SPEC = default_spec()
CPU = SPEC.device("cpu")


def op_with(policy: Policy) -> str:
    """The first cpu op of ``policy`` that has catalog samples."""
    for op in CPU.ops_with(policy):
        info = SPEC.op_info(op)
        if info and info.samples:
            return op
    raise LookupError(f"no cpu op with policy {policy} has samples")


LOWER = op_with(Policy.LOWER_PRECISION_FP)


def call_sample(op: str, float_dtype: torch.dtype = torch.float32) -> Any:
    m = materialize(SPEC.ops[op].samples[0], float_dtype, "cpu")
    return op_overload(op)(*m.args, **m.kwargs)


def out_dtype(op: str, float_dtype: torch.dtype = torch.float32) -> torch.dtype:
    out = call_sample(op, float_dtype)
    return (out[0] if isinstance(out, (tuple, list)) else out).dtype  # type: ignore[no-any-return]


def torch_state() -> tuple[Any, ...]:
    return (
        torch.is_autocast_enabled("cpu"),
        torch.get_autocast_dtype("cpu"),
        torch.is_autocast_cache_enabled(),
    )


def dispatch_table() -> dict[str, str]:
    return {op: torch._C._dispatch_dump(op) for op in sorted(CPU.ops)}


OFF = (False, True)  # the reference key's thread-local (included, excluded) outside regions


def reference_key_state() -> tuple[bool, bool]:
    key = reference_dispatch.REFERENCE_KEY
    return (
        torch._C._dispatch_tls_is_dispatch_key_included(key),
        torch._C._dispatch_tls_is_dispatch_key_excluded(key),
    )


def spec_without(op: str) -> Any:
    """The bundled spec with ``op`` left out of cpu's list (a planted deviation)."""
    ops = {k: v for k, v in CPU.ops.items() if k != op}
    device = dataclasses.replace(CPU, ops=ops)
    return dataclasses.replace(SPEC, devices={**SPEC.devices, "cpu": device}, content_hash="planted")

"""Observe the installed torch's autocast: which ops it registers, and what each does.

Technique: under autocast, call the op with arguments synthesized from its
schema, and catch the call that the Autocast kernel passes down with a recording
kernel registered (for the duration of the call only) at the Autograd key,
which sits right below Autocast. The recording kernel raises before any real
kernel runs, so shapes do not matter and no hardware is needed: on devices that
are not present the tensors are FakeTensors of that device type.

From what arrives below Autocast the policy follows:

=======================  =====================================================
observation              policy
=======================  =====================================================
float32 args cast down   lower_precision_fp
lower args cast to fp32  fp32
same op, dtype=float32   fp32_set_opt_dtype (args untouched, dtype argument set)
other overload, dtype    fp32_append_dtype (redispatched with dtype appended)
mixed args -> widest     promote
autocast raises          banned (the message is recorded)
=======================  =====================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from autocast_spec.model import Policy

from ..engine.torch_registry import autocast_registrations
from ..harness.calls import Call, autograd_key_for, call_intercepted, synthesize_call
from ..harness.devices import device_is_real, fake_device_supported, tensor_context
from ..harness.state import raw_autocast


@dataclass(frozen=True)
class Observation:
    op: str
    device: str
    policy: Policy | None
    detail: str = ""
    message: str | None = None  # banned: the error text
    append_target: str | None = None  # fp32_append_dtype: the overload called
    error: str | None = None  # set when the op could not be observed

    @property
    def observed(self) -> bool:
        return self.error is None


# ---------------------------------------------------------------------------
# Classification
# ---------------------------------------------------------------------------


def observe_op(
    op: str, device: str, dispatch_key: str, lower: torch.dtype, fake: bool | None = None
) -> Observation:
    """Observe ``op``'s autocast policy on ``device`` (its Autocast key ``dispatch_key``)."""
    autograd_key = autograd_key_for(dispatch_key)
    fake = (not device_is_real(device)) if fake is None else fake
    f32 = torch.float32

    def run(dtypes: Callable[[int], torch.dtype], enabled: bool = True) -> tuple[Call | None, str | None]:
        with tensor_context(device, fake):

            def make(i: int) -> torch.Tensor:
                return torch.zeros(2, 2, device=device, dtype=dtypes(i))

            try:
                args, kwargs = synthesize_call(op, make)
            except Exception as e:
                return None, f"cannot build arguments: {e}"
            with raw_autocast(device, lower, enabled):
                return call_intercepted(op, autograd_key, args, kwargs)

    # A: float32 inputs
    call_a, err_a = run(lambda i: f32)
    if err_a is not None:
        plain, plain_err = run(lambda i: f32, enabled=False)
        if plain is not None and plain_err is None:
            msg = err_a.split(": ", 1)[1] if ": " in err_a else err_a
            if "INTERNAL ASSERT" in msg:
                # an assert on the synthesized arguments inside the Autocast kernel, not a ban
                why = f"the kernel asserted on synthesized arguments: {msg}"
                return Observation(op, device, None, error=why)
            return Observation(op, device, Policy.BANNED, "autocast raised", message=msg)
        return Observation(op, device, None, error=err_a)
    if call_a is None:
        return Observation(op, device, None, error="the call never reached the op below Autocast")
    if call_a.op == op and call_a.float_dtypes() and all(d == lower for d in call_a.float_dtypes()):
        return Observation(op, device, Policy.LOWER_PRECISION_FP, "float32 inputs cast to lower")

    # B: lower inputs
    call_b, err_b = run(lambda i: lower)
    if call_b is None:
        return Observation(op, device, None, error=err_b or "not intercepted")
    b_dtypes = call_b.float_dtypes()
    if call_b.op != op and call_b.has_dtype_value(f32):
        return Observation(
            op,
            device,
            Policy.FP32_APPEND_DTYPE,
            f"redispatched to {call_b.op}",
            append_target=call_b.op,
        )
    if call_b.op == op and b_dtypes and all(d == f32 for d in b_dtypes):
        return Observation(op, device, Policy.FP32, "lower inputs cast to float32")
    if call_b.op == op and call_b.has_dtype_value(f32) and all(d == lower for d in b_dtypes):
        return Observation(op, device, Policy.FP32_SET_OPT_DTYPE, "dtype=float32 set, inputs kept")

    # C: mixed inputs, first lower, the rest float32
    call_c, err_c = run(lambda i: lower if i == 0 else f32)
    if call_c is None:
        return Observation(op, device, None, error=err_c or "not intercepted")
    c_dtypes = call_c.float_dtypes()
    if len(c_dtypes) > 1 and all(d == f32 for d in c_dtypes):
        return Observation(op, device, Policy.PROMOTE, "mixed inputs cast to the widest type")
    return Observation(op, device, None, "no cast observed")


@dataclass
class DeviceObservation:
    device: str
    dispatch_key: str
    registered: frozenset[str]
    observations: dict[str, Observation] = field(default_factory=dict)
    unobservable_reason: str | None = None


def observe_device(
    device: str,
    dispatch_key: str,
    lower: torch.dtype = torch.float16,
    progress: Callable[[int, int, str], None] | None = None,
) -> DeviceObservation:
    """Registrations of ``dispatch_key`` and the observed policy of each."""
    registered = autocast_registrations(dispatch_key)
    result = DeviceObservation(device, dispatch_key, registered)
    fake = not device_is_real(device)
    if fake:
        reason = fake_device_supported(device)
        if reason:
            result.unobservable_reason = reason
            return result
    ops = sorted(registered)
    for i, op in enumerate(ops):
        if progress:
            progress(i, len(ops), op)
        result.observations[op] = observe_op(op, device, dispatch_key, lower, fake=fake)
    return result

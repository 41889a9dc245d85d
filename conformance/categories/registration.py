"""registration: the backend registers Autocast kernels for exactly the spec's ops.

Cases: every op the device spec lists (with a policy, or ``registered_only``: a vendor's own
operator whose policy the spec does not state), and every op carrying a kernel at the
device's ``Autocast<Device>`` dispatch key (the installed torch's dispatcher), once each.

Procedure: ask the dispatcher whether the op has a kernel at that key.
Expectation: a listed op has a kernel; an op with a kernel is listed.

Higher-order operators (``higher_order_ops``: Python kernels, ``HigherOrderOperator.py_impl``):
every one the spec lists and every one with a Python kernel at the key, once each, and per
dtype under test each listed one's policy: called on float32 tensors under autocast, what
reaches the Autograd key below (intercepted there) has its ``args`` in the autocast dtype
(``lower_precision_fp``) or as given (``none``).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from autocast_spec.higher_order import HigherOrderKernel
from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.engine.torch_registry import autocast_registrations
from reference_impl.harness.calls import autograd_key_for
from reference_impl.harness.state import quiet

from ..kit.case import Case
from ..kit.verdict import Observation, one_line
from ..target import Target

KERNEL_SET = "registration.kernel_set"
HIGHER_ORDER = "registration.higher_order"
CHECKS = (KERNEL_SET, HIGHER_ORDER)
UNLISTED = "unlisted"  # the policy part of the id of an op the spec does not list
REGISTERED_ONLY = "registered_only"  # ... of a vendor's operator listed without a policy


def _listed_as(target: Target, op: str) -> str:
    policy = target.device_spec.policy_of(op)
    if policy is not None:
        return str(policy)
    return REGISTERED_ONLY if op in target.device_spec.registered_only else UNLISTED


def cases(target: Target) -> list[Case]:
    registered = autocast_registrations(target.dispatch_key)
    listed = set(target.device_spec.ops) | set(target.device_spec.registered_only)
    ops = sorted(op for op in listed | registered if target.selects(op))
    return [Case("registration", target.device, "", _listed_as(target, op), op) for op in ops]


def _hops() -> dict[str, Any]:
    return dict(torch._ops._higher_order_ops)  # torch's registry of higher-order operators


def _py_kernel(target: Target, name: str) -> Any:
    hop = _hops().get(name)
    return None if hop is None else hop.py_kernels.get(getattr(torch._C.DispatchKey, target.dispatch_key))


def higher_order_cases(target: Target) -> list[Case]:
    """Each higher-order operator listed or registered at the key; each listed one per dtype."""
    listed = {k.op: k for k in target.device_spec.higher_order_ops}
    names = sorted(set(listed) | {n for n in _hops() if _py_kernel(target, n) is not None})
    out = [
        Case(
            "registration",
            target.device,
            "",
            listed[n].policy if n in listed else UNLISTED,
            f"higher_order::{n}",
        )
        for n in names
    ]
    return out + [
        Case("registration", target.device, dt, listed[n].policy, f"higher_order::{n}", entry="called")
        for dt in target.dtypes
        for n in sorted(listed)
    ]


GENERATORS = {"registration": cases, "higher_order": higher_order_cases}


def higher_order(target: Target, case: Case) -> Observation:
    """A listed higher-order operator has a Python kernel at the key and one at the key is
    listed; called, its kernel applies the listed policy to its ``args``."""
    name = case.op.split("::", 1)[1]
    kernel = _py_kernel(target, name)
    listed = next((k for k in target.device_spec.higher_order_ops if k.op == name), None)
    key = target.dispatch_key
    if not case.entry:
        where = f"listed as {case.policy} ({listed.loc})" if listed else f"not in the {target.device} spec"
        return Observation(
            case,
            HIGHER_ORDER,
            f"torch.ops.higher_order.{name}: {where}",
            f"{key} {'has' if listed else 'has no'} Python kernel",
            f"{key} {'has' if kernel is not None else 'has no'} Python kernel",
            reproduce=f'python -c "import torch; print(torch.ops.higher_order.{name}.py_kernels)"',
        )
    assert listed is not None
    lower = dtype_of(case.dtype)
    want = [case.dtype if listed.policy == "lower_precision_fp" else "float32"] * len(listed.args)
    got = _arrival(target, name, kernel, listed, lower)
    what = f"torch.ops.higher_order.{name} under autocast({case.dtype}) on float32 {', '.join(listed.args)}"
    return Observation(case, HIGHER_ORDER, what, want, got, facts={"rule": f"{listed.policy} ({listed.loc})"})


class _Arrived(Exception):
    pass


def _arrival(target: Target, name: str, kernel: Any, listed: HigherOrderKernel, lower: torch.dtype) -> Any:
    """The dtypes of ``listed.args`` as they reach the Autograd key below Autocast (the rest of
    the kernel's required arguments are passed as empty tuples: a kernel that casts only passes them on)."""
    if kernel is None:
        return f"no Python kernel at {target.dispatch_key}"
    hop = _hops()[name]
    below = autograd_key_for(target.dispatch_key)
    seen: list[str] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        seen.extend(dtype_name(a.dtype) for a in args[: len(listed.args)])
        raise _Arrived

    required = [p for p in inspect.signature(kernel).parameters.values() if p.default is p.empty]
    saved = hop.py_kernels.get(below)
    hop.py_kernels[below] = record
    hop._dispatch_cache.clear()
    try:
        with target.tensors(), quiet():
            x = [torch.randn(1, 1, 16, 8, device=target.device) for _ in listed.args]
            with target.autocast(lower):
                hop(*x, *[()] * (len(required) - len(x)))  # tuples: what a kernel passes on may be joined
    except _Arrived:
        return seen
    except Exception as e:
        return f"raises {one_line(e)}"
    finally:
        if saved is None:
            hop.py_kernels.pop(below, None)
        else:
            hop.py_kernels[below] = saved
        hop._dispatch_cache.clear()
    return "nothing arrived below Autocast"


def kernel_set(target: Target, case: Case) -> Observation:
    registered = case.op in autocast_registrations(target.dispatch_key)
    listed = case.policy != UNLISTED
    state = {True: "has a kernel", False: "has no kernel"}
    key = target.dispatch_key
    if listed:
        entry = target.device_spec.ops.get(case.op)
        loc = entry.loc if entry else target.device_spec.loc
        what = f"the spec lists it as {case.policy} ({loc}) but {key} has no kernel for it"
    else:
        what = (
            f"{key} has a kernel for it but the {target.device} spec for torch "
            f"{target.spec.torch_version} does not list it. If this torch is newer than the spec, "
            f"probe it: 'autocast-spec probe --device {target.device} -o {target.device}.yaml', then "
            f"rerun with '--spec {target.device}.yaml'; else add the op to the device spec under its policy"
        )
    vendor = target.device_spec.vendor
    backend = f"import {vendor.module}; " if vendor else ""
    return Observation(
        case,
        KERNEL_SET,
        what,
        f"{key} {state[listed]}",
        f"{key} {state[registered]}",
        reproduce=f"python -c \"import torch; {backend}print(torch._C._dispatch_dump('{case.op}'))\"",
    )

"""registration: the backend registers Autocast kernels for exactly the spec's ops.

Cases: every op the device spec lists (with a policy, or ``registered_only``: a vendor's own
operator whose policy the spec does not state), and every op carrying a kernel at the
device's ``Autocast<Device>`` dispatch key (the installed torch's dispatcher), once each.

Procedure: ask the dispatcher whether the op has a kernel at that key.
Expectation: a listed op has a kernel; an op with a kernel is listed.
"""

from __future__ import annotations

from reference_impl.engine.torch_registry import autocast_registrations

from ..kit.case import Case
from ..kit.verdict import Observation
from ..target import Target

KERNEL_SET = "registration.kernel_set"
CHECKS = (KERNEL_SET,)
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


GENERATORS = {"registration": cases}


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

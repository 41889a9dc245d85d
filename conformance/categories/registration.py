"""registration: the backend registers Autocast kernels for exactly the spec's ops.

Cases: every op the device spec lists, and every op carrying a kernel at the device's
``Autocast<Device>`` dispatch key (the installed torch's dispatcher), once each.

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


def cases(target: Target) -> list[Case]:
    registered = autocast_registrations(target.dispatch_key)
    ops = sorted(op for op in set(target.device_spec.ops) | registered if target.selects(op))
    return [
        Case("registration", target.device, "", str(target.device_spec.policy_of(op) or UNLISTED), op)
        for op in ops
    ]


GENERATORS = {"registration": cases}


def kernel_set(target: Target, case: Case) -> Observation:
    registered = case.op in autocast_registrations(target.dispatch_key)
    listed = case.policy != UNLISTED
    state = {True: "has a kernel", False: "has no kernel"}
    key = target.dispatch_key
    if listed:
        loc = target.device_spec.ops[case.op].loc
        what = f"the spec lists it as {case.policy} ({loc}) but {key} has no kernel for it"
    else:
        what = (
            f"{key} has a kernel for it but the {target.device} spec for torch "
            f"{target.spec.torch_version} does not list it. If this torch is newer than the spec, "
            f"probe it: 'autocast-spec probe --device {target.device} -o {target.device}.yaml', then "
            f"rerun with '--spec {target.device}.yaml'; else add the op to the device spec under its policy"
        )
    return Observation(
        case,
        KERNEL_SET,
        what,
        f"{key} {state[listed]}",
        f"{key} {state[registered]}",
        reproduce=f"python -c \"import torch; print(torch._C._dispatch_dump('{case.op}'))\"",
    )

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

from autocast_spec.model import Policy
from reference_impl.engine.torch_registry import autocast_registrations

from ..kit.case import Case, Listing, PolicyPart
from ..kit.category import Category, owes
from ..kit.verdict import Observation
from ..target import Target

KERNEL_SET = "registration.kernel_set"


def _listed_as(target: Target, op: str) -> PolicyPart:
    policy = target.device_spec.policy_of(op)
    if policy is not None:
        return policy
    return Listing.REGISTERED_ONLY if op in target.device_spec.registered_only else Listing.UNLISTED


def cases(target: Target) -> list[Case[None]]:
    registered = autocast_registrations(target.dispatch_key)
    listed = set(target.device_spec.ops) | set(target.device_spec.registered_only)
    ops = sorted(op for op in listed | registered if target.selects(op))
    return [Case("registration", target.device, None, _listed_as(target, op), op) for op in ops]


CATEGORY = Category(
    "registration",
    __doc__,
    checks=(KERNEL_SET,),
    generators=(cases,),
    owed=owes(*Policy),
)


def kernel_set(target: Target, case: Case[None]) -> Observation:
    registered = case.op in autocast_registrations(target.dispatch_key)
    listed = case.policy is not Listing.UNLISTED
    state = {True: "has a kernel", False: "has no kernel"}
    key = target.dispatch_key
    if listed:
        entry = target.device_spec.ops.get(case.op)
        loc = entry.loc if entry else target.device_spec.loc
        listed_as = case.policy.value if case.policy else ""
        what = f"the spec lists it as {listed_as} ({loc}) but {key} has no kernel for it"
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

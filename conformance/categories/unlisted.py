"""unlisted: ops the device spec does not list run in their input dtype.

Cases, per dtype under test, with float32 inputs and with lower inputs: every catalogued
op the device does not list (other devices list it), and the ops of the registry sample
(a stable sample of aten ops without an Autocast kernel here, by name hash) and of
``rules.unlisted_watchlist`` (ops users often expect autocast to change), called with
arguments synthesized from their schema. With ``--op``, the selected ops the device does
not list.

Procedure: the call under native autocast, intercepted right below the Autocast key.
Expectation: its tensors arrive in the dtypes they were given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from reference_impl.engine.torch_registry import op_overload
from reference_impl.harness.calls import synthesize_call
from reference_impl.harness.samples import Materialized

from ..kit.case import Case, Listing, MixEntry, MixRole, catalogued, shown
from ..kit.category import Category
from ..kit.dispatcher import registry_sample, synthesizable
from ..kit.inputs import make_inputs, resolve_mix
from ..kit.intercept import arrived, intercepted, tensor_dtypes
from ..kit.verdict import Observation
from ..target import Target
from .eligibility import leaves_alone

UNTOUCHED = "unlisted.untouched"


@dataclass(frozen=True)
class UnlistedCall:
    """Where the op comes from (the catalog, or the registry sample) and the inputs' dtype."""

    from_registry: bool = shown("registry-")
    given: MixEntry = torch.float32  # float32, or the autocast dtype (MixRole.LOWER)
    ID: ClassVar[str] = "{from_registry}{given}_in"


def cases(target: Target) -> list[Case[UnlistedCall]]:
    # a vendor's registered_only operator carries a kernel whose policy the spec does not state:
    # not unlisted (the registration check requires its kernel)
    listed = frozenset(target.device_spec.ops) | frozenset(target.device_spec.registered_only)
    if target.selected_ops:  # --op: the selected ops the device does not list, sampled or not
        pool = sorted(op for op in target.selected_ops if op not in listed)
        catalog = [op for op in pool if op in target.spec.ops and catalogued(target, op)]
        sampled = [op for op in pool if op not in target.spec.ops and synthesizable(op)]
    else:
        catalog = [op for op in sorted(target.spec.ops) if op not in listed and catalogued(target, op)]
        watch = [
            op
            for op in target.spec.rules.unlisted_watchlist
            if op not in listed and op not in target.spec.ops and synthesizable(op)
        ]
        sampled = [op for op in registry_sample(target.dispatch_key, listed) if op not in target.spec.ops]
        sampled = sorted(set(sampled) | set(watch))
    return [
        Case(
            "unlisted", target.device, dtype, Listing.UNLISTED, op, op, params=UnlistedCall(reg, d), mix=(d,)
        )
        for dtype in target.dtypes
        for reg, ops in ((False, catalog), (True, sampled))
        for op in ops
        for d in (torch.float32, MixRole.LOWER)
    ]


CATEGORY = Category(
    "unlisted",
    __doc__,
    checks=(UNTOUCHED,),
    generators=(cases,),
)


def untouched(target: Target, case: Case[UnlistedCall]) -> Observation:
    lower = case.lower
    dt = resolve_mix(case.mix, lower)
    with target.tensors():
        info = target.spec.op_info(case.op)
        if info is not None and info.samples:
            m = make_inputs(info.samples[0], dt, target.device)
        else:
            args, kwargs = synthesize_call(
                case.op, lambda i: torch.ones(2, 2, dtype=dt[0], device=target.device)
            )
            m = Materialized(args, kwargs)
        fn = op_overload(case.op)
        calls, err = intercepted(target, lower, case.op, lambda: fn(*m.args, **m.kwargs))
        if err is None and arrived(calls, case.op) is None:  # not seen by the Python dispatcher
            calls, err = intercepted(target, lower, case.op, lambda: fn(*m.args, **m.kwargs), registered=True)
    why = f"{case.op} is not in the {target.device} spec: it must run in its input dtype"
    given = tensor_dtypes([*m.args, *m.kwargs.values()])
    return leaves_alone(case, m, given, arrived(calls, case.op), case.op, err, why, check=UNTOUCHED)

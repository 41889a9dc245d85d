"""opt_dtype: fp32_set_opt_dtype respects an explicit ``dtype=`` (autocast sets only an unset one).

Cases, per dtype under test: every op of the fp32_set_opt_dtype policy with samples whose
schema has an optional dtype argument, on lower inputs.

Procedure: the call with ``dtype=torch.float64`` given explicitly, under native autocast
and through the oracle.
Expectation: the oracle's output dtypes, which keep float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from autocast_spec.model import Policy
from reference_impl.engine.signatures import SlotKind, signature
from reference_impl.harness.samples import Materialized, call

from ..kit.calls import PolicyRun, decide, run_native, run_oracle
from ..kit.case import Case, MixRole, listed_ops
from ..kit.category import Category
from ..kit.dispatcher import has_optional_dtype
from ..kit.inputs import case_inputs
from ..kit.outputs import dtype_observation
from ..kit.verdict import Observation
from ..target import Target

EXPLICIT_DTYPE = "opt_dtype.explicit_dtype"


@dataclass(frozen=True)
class ExplicitDtype:
    """The call gives ``dtype=torch.float64`` itself."""

    ID: ClassVar[str] = "explicit_dtype"


def cases(target: Target) -> list[Case[ExplicitDtype]]:
    return [
        lo.case(target, "opt_dtype", params=ExplicitDtype(), mix=(MixRole.LOWER,))
        for lo in listed_ops(target, (Policy.FP32_SET_OPT_DTYPE,))
        if has_optional_dtype(lo.op)
    ]


CATEGORY = Category(
    "opt_dtype",
    __doc__,
    checks=(EXPLICIT_DTYPE,),
    generators=(cases,),
    runs_kernel=True,
)


def explicit_dtype(target: Target, case: Case[ExplicitDtype]) -> Observation:
    lower = case.lower
    slot = next(s for s in signature(case.op).slots if s.kind is SlotKind.OPTIONAL_DTYPE)
    with target.tensors():
        m0 = case_inputs(target.spec.ops[case.op].samples[0], case.mix, lower, target.device)
        m = Materialized(m0.args, {**m0.kwargs, slot.name: torch.float64})
        native = run_native(target, lower, lambda: call(case.op, m))
        d = decide(target, lower, case.op, m)
        run = PolicyRun(m, native, run_oracle(target, lower, case.op, m, d), d.text)
    return dtype_observation(case, run, EXPLICIT_DTYPE, case.op)

"""op_policy: under autocast, every entry point of every listed op gives the dtype its policy demands.

Cases, per dtype under test, for every listed op with samples (banned ops aside: they
have their own category), with the input mix that makes the policy visible (float32
inputs for a lower op, lower inputs for an fp32 op, one of each for promote):

* each sample through the aten op itself, and the first (or its own) sample through each
  public entry point the op catalog names (``torch.mm``, ``Tensor.mm``,
  ``torch.nn.functional.linear``): ``test_op_policy``;
* each ``torch.X`` / ``Tensor.X`` pair that takes the same sample:
  ``test_torch_and_tensor_agree``.

Procedure: the call under native autocast, and the reference oracle on the same inputs
(the spec's cast plan applied explicitly, :func:`conformance.kit.calls.policy_call`).
Expectation: the output dtypes are the oracle's; ``torch.X`` and ``Tensor.X`` agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from autocast_spec.catalog import OpInfo
from autocast_spec.model import Policy

from ..kit.calls import PolicyRun, entry_sample, policy_call
from ..kit.case import Case, listed_ops
from ..kit.category import Category, owes
from ..kit.outputs import dtype_observation
from ..kit.verdict import Observation
from ..target import Target

OUTPUT_DTYPE = "op_policy.output_dtype"
ENTRY_AGREEMENT = "op_policy.entry_agreement"


@dataclass(frozen=True)
class Method:
    """The ``Tensor`` method whose result must equal the case's ``torch`` function's."""

    name: str


def policy_cases(target: Target) -> list[Case[None]]:
    out = []
    for lo in listed_ops(target):
        out += [lo.case(target, "op_policy", sample=i) for i in range(len(lo.info.samples))]
        out += [lo.case(target, "op_policy", entry=ep.name) for ep in lo.info.entry_points]
    return out


def entry_point_pairs(info: OpInfo) -> list[tuple[str, str]]:
    """``torch.X`` / ``Tensor.X`` entry points of one op taking the same sample."""
    by_name = {ep.name: ep for ep in info.entry_points}
    pairs = []
    for ep in info.entry_points:
        if ep.name.startswith("torch.") and ep.name.count(".") == 1:
            method = "Tensor." + ep.name.split(".", 1)[1]
            other = by_name.get(method)
            if other is not None and other.sample == ep.sample:
                pairs.append((ep.name, method))
    return pairs


def agreement_cases(target: Target) -> list[Case[Method]]:
    return [
        lo.case(target, "op_policy", entry=fn, params=Method(method))
        for lo in listed_ops(target)
        for fn, method in entry_point_pairs(lo.info)
    ]


CATEGORY = Category(
    "op_policy",
    __doc__,
    checks=(OUTPUT_DTYPE, ENTRY_AGREEMENT),
    generators=(policy_cases, agreement_cases),
    owed=owes(*(p for p in Policy if p is not Policy.BANNED)),
    runs_kernel=True,
)


def output_dtypes(target: Target, case: Case[None]) -> Observation:
    """The case's entry point under native autocast against the oracle."""
    return dtype_observation(case, policy_call(target, case, case.entry), OUTPUT_DTYPE, case.entry)


def entry_agreement(target: Target, case: Case[Method]) -> Observation:
    """``Tensor.X`` on the same inputs gives what ``torch.X`` gives: the same dtypes, or an error."""
    assert case.params is not None
    fn, method = case.entry, case.params.name
    assert entry_sample(target, case, fn) is entry_sample(target, case, method), "pairs share a sample"
    a, b = policy_call(target, case, fn), policy_call(target, case, method)
    return Observation(
        case,
        ENTRY_AGREEMENT,
        f"{method} disagrees with {fn} under autocast (expected: {fn}'s result)",
        _result(a),
        _result(b),
        inputs=a.inputs,
        entry=fn,
    )


def _result(run: PolicyRun) -> str:
    return "raises" if run.native.error is not None else ", ".join(run.native.dtypes)

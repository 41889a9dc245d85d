"""Op policy: under native autocast, every entry point of every listed op gives the spec's dtype."""

from __future__ import annotations

import pytest

from conformance.assertions import assert_same_dtypes, fail
from conformance.cases import Case
from conformance.checks import entry_sample, policy_call
from conformance.target import Target


@pytest.mark.conformance_cases("op_policy")
def test_op_policy(target: Target, case: Case) -> None:
    r = policy_call(target, case, case.entry)
    assert_same_dtypes(case, r.native, r.expected, r.inputs, case.entry, r.plan)


@pytest.mark.conformance_cases("entry_agreement")
def test_torch_and_tensor_agree(target: Target, case: Case) -> None:
    fn, method = case.entry, case.method
    a = policy_call(target, case, fn)
    b = policy_call(target, case, method)
    if a.native.dtypes != b.native.dtypes or (a.native.error is None) != (b.native.error is None):
        fail(
            case,
            f"{fn} and {method} disagree under autocast",
            a.inputs,
            fn,
            torch_fn=a.native.dtypes or a.native.error,
            tensor_method=b.native.dtypes or b.native.error,
        )
    assert entry_sample(target, case, fn) is entry_sample(target, case, method)

"""Registration set: the backend registers Autocast kernels for exactly the spec's ops."""

from __future__ import annotations

import pytest

from conformance.cases import UNLISTED, Case
from conformance.target import Target
from reference_impl.torch_registry import autocast_registrations


@pytest.mark.conformance_cases("registration")
def test_registration(target: Target, case: Case) -> None:
    registered = case.op in autocast_registrations(target.dispatch_key)
    listed = case.policy != UNLISTED
    if listed and not registered:
        entry = target.device_spec.ops[case.op]
        pytest.fail(
            f"{case.op}: the spec lists it as {case.policy} ({entry.loc}) but {target.dispatch_key} "
            f"has no kernel for it",
            pytrace=False,
        )
    if registered and not listed:
        pytest.fail(
            f"{case.op}: {target.dispatch_key} has a kernel for it but the {target.device} spec for torch "
            f"{target.spec.torch_version} does not list it. If this torch is newer than the spec, probe it: "
            f"'autocast-spec probe --device {target.device} -o {target.device}.yaml', then rerun with "
            f"'--spec {target.device}.yaml'; else add the op to the device spec under its policy",
            pytrace=False,
        )

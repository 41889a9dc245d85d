"""The self-conformance mutant: ``--implementation reference`` with a broken policy engine
(the suite must catch the reference too)."""

from __future__ import annotations

from typing import Any

from autocast_spec.model import Policy

from .mutant import CPU, context_mutant, op_keyword


def _reference_engine_leaves_lower_ops() -> None:
    import reference_impl.kernels.reference_autocast as ra
    from reference_impl.engine.policy import untouched_plan

    decide = ra.decide

    def broken(device: Any, rules: Any, state: Any, op: str, *rest: Any, **kw: Any) -> Any:
        entry = device.ops.get(op)
        if entry is not None and entry.policy is Policy.LOWER_PRECISION_FP:
            return untouched_plan(op, entry.policy, "mutant: lower_precision_fp ops left alone")
        return decide(device, rules, state, op, *rest, **kw)

    ra.decide = broken  # type: ignore[assignment]


REFERENCE_MUTANTS = [
    context_mutant(
        "reference-leaves-lower-ops",
        "self-conformance",
        "--implementation reference with a policy engine that leaves lower_precision_fp ops alone",
        ("test_op_policy.py", "test_numerics.py", "test_context.py"),
        _reference_engine_leaves_lower_ops,
        keyword=op_keyword("aten::mm") + " or test_nesting",
        options=(*CPU, "--implementation", "reference"),
    ),
]

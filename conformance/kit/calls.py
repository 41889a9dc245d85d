"""Running one call natively and through the reference oracle, with the cast plan decided once.

The oracle is the spec's cast plan applied explicitly, with the kernel called below every
Autocast key (:mod:`reference_impl.engine.oracle`). :func:`decide` asks the policy engine once
per call; the same :class:`Decision` gives the oracle's casts, the dtype the plan names
and the plan's text in a failure message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from autocast_spec.catalog import EntryPoint, Sample
from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.engine.oracle import oracle_apply
from reference_impl.engine.policy import AutocastState, CastPlan, expected_output_dtype
from reference_impl.engine.policy import decide as decide_plan
from reference_impl.harness.samples import Materialized, call, entry_point_sample, output_tensors
from reference_impl.harness.state import quiet

from ..target import Target
from .case import Case, Mix
from .inputs import case_inputs
from .intercept import arrived, intercepted


@dataclass(frozen=True)
class Outcome:
    """What a call did: its output, or the error it raised."""

    value: Any = None
    error: BaseException | None = None
    first_only: bool = False  # only the first output's dtype is known (policy-only fallback)

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(dtype_name(t.dtype) for t in output_tensors(self.value))

    def tensors(self) -> list[torch.Tensor]:
        return output_tensors(self.value)


def capture(fn: Callable[[], Any]) -> Outcome:
    """``fn()``'s output or error. Outputs on a device are copied to the host once inside the
    call: a lazy backend (torch_xla) runs, and raises, only when a value is read, and an
    error raised then is the call's, not the comparison's."""
    try:
        value = fn()
        for t in output_tensors(value):
            if t.device.type not in ("cpu", "meta") and not isinstance(t, FakeTensor):
                t.to("cpu")
        return Outcome(value=value)
    except Exception as e:
        return Outcome(error=e)


def run_native(target: Target, lower: torch.dtype, fn: Callable[[], Any]) -> Outcome:
    """``fn()`` under the autocast under test on the backend."""
    with quiet(), target.autocast(lower):
        return capture(fn)


def state_for(target: Target, lower: torch.dtype, device: str | None = None) -> AutocastState:
    return AutocastState(device or target.device, lower, True)


@dataclass(frozen=True)
class Decision:
    """The policy engine's plan for one call (decided once), or why there is none."""

    plan: CastPlan | None
    error: BaseException | None = None

    @property
    def text(self) -> str:
        """The plan, for a reader: its reason, casts and dtype argument."""
        p = self.plan
        if p is None:
            return f"(no plan: {self.error})"
        casts = ", ".join(
            f"{'.'.join(map(str, c.path))} {dtype_name(c.from_dtype)}->{dtype_name(c.to_dtype)}"
            for c in p.casts
        )
        extra = f"; dtype={dtype_name(p.set_dtype)}" if p.set_dtype is not None else ""
        return p.reason + (f" [{casts}]" if casts else "") + extra

    @property
    def target_op(self) -> str:
        """The overload the plan calls (another one for fp32_append_dtype)."""
        assert self.plan is not None, self.text
        return self.plan.target_op

    def arrival(self, m: Materialized) -> tuple[str, list[str]]:
        """The overload the plan calls and the dtypes its tensors should arrive in below Autocast."""
        assert self.plan is not None, self.text
        to = {c.path: dtype_name(c.to_dtype) for c in self.plan.casts}
        return self.plan.target_op, [to.get(path, dtype_name(t.dtype)) for path, t in m.tensor_paths()]


def decide(target: Target, lower: torch.dtype, op: str, m: Materialized) -> Decision:
    spec = target.spec
    try:
        plan = decide_plan(
            target.device_spec, spec.rules, state_for(target, lower), op, m.args, m.kwargs, spec.op_info(op)
        )
    except Exception as e:
        return Decision(None, e)
    return Decision(plan)


def run_oracle(
    target: Target, lower: torch.dtype, op: str, m: Materialized, d: Decision | None = None
) -> Outcome:
    """The reference: the plan's casts applied explicitly, the kernel called below autocast."""
    d = d if d is not None else decide(target, lower, op, m)
    if d.plan is None:
        return Outcome(error=d.error)
    plan = d.plan
    with quiet():
        return capture(lambda: oracle_apply(plan, m.args, m.kwargs))


def entry_sample(target: Target, case: Case[Any], entry: str) -> Sample:
    """The sample an entry point of the case's op is called with."""
    info = target.spec.ops[case.op]
    if entry == case.op or entry.startswith("aten::"):
        return info.samples[case.sample]
    for ep in info.entry_points:
        if ep.name == entry:
            return entry_point_sample(ep, info.samples)
    return entry_point_sample(EntryPoint(entry), info.samples)


@dataclass
class PolicyRun:
    """One call through an entry point: native autocast, and what the spec expects."""

    inputs: Materialized
    native: Outcome
    expected: Outcome
    plan: str


def policy_call(target: Target, case: Case[Any], entry: str, mix: Mix | None = None) -> PolicyRun:
    """Native autocast through ``entry`` against the reference oracle on the same inputs.

    The reference always calls the aten op itself: every entry point must behave like the
    op it reaches. Where the kernel cannot run (policy-only FakeTensors, or an op whose
    samples only the dispatcher can take: ``intercept_only``), what arrives below Autocast
    is compared with the plan instead.
    """
    lower = case.dtype
    assert lower is not None, f"{case.id}: a policy call needs the autocast dtype"
    sample = entry_sample(target, case, entry)
    with target.tensors():
        m = case_inputs(sample, mix or case.mix, lower, target.device, seed=case.seed)
        native = run_native(target, lower, lambda: call(entry, m))
        d = decide(target, lower, case.op, m)
        expected = _reference(target, lower, case.op, entry, m, d)
        by_interception = target.policy_only or target.spec.ops[case.op].intercept_only
        if by_interception and native.error is not None:
            return _by_interception(target, case, lower, m, native, d.text, entry)
        if expected.error is not None and target.policy_only:
            expected = _from_plan(target, lower, d, expected)
    return PolicyRun(m, native, expected, d.text)


def _from_plan(target: Target, lower: torch.dtype, d: Decision, failed: Outcome) -> Outcome:
    """Policy-only, where a kernel cannot run on FakeTensors: the dtype the plan names (only
    the first output's dtype is known then: ``Outcome.first_only``)."""
    if d.plan is None:
        return failed
    if d.plan.raises is not None:
        return Outcome(error=RuntimeError(d.plan.raises))
    dtype = expected_output_dtype(d.plan, state_for(target, lower))
    if dtype is None:
        return failed
    return Outcome(value=torch.empty(0, dtype=dtype, device="meta"), first_only=True)


def _by_interception(
    target: Target,
    case: Case[Any],
    lower: torch.dtype,
    m: Materialized,
    native: Outcome,
    plan: str,
    entry: str,
) -> PolicyRun:
    """The op's own arguments are recorded with autocast off (an entry point may rearrange
    them), the plan is decided on them, and the call under autocast must arrive as it says."""
    through_entry = lambda: call(entry, m)  # noqa: E731
    off, err = intercepted(target, lower, case.op, through_entry, enabled=False)
    if not off:
        return PolicyRun(
            m, native, Outcome(error=err or RuntimeError(f"{entry} does not reach {case.op}")), plan
        )
    first = Materialized(tuple(off[0].args), dict(off[0].kwargs))
    target_op, want = decide(target, lower, off[0].op, first).arrival(first)
    on, _ = intercepted(target, lower, case.op, through_entry)
    got = arrived(on, target_op)
    if got is None:
        return PolicyRun(m, native, Outcome(value=None), plan)
    meta = lambda ds: [torch.empty(0, dtype=dtype_of(d), device="meta") for d in ds]  # noqa: E731
    return PolicyRun(
        m, Outcome(value=meta(got)), Outcome(value=meta(want)), plan + " (observed below Autocast)"
    )


def _reference(
    target: Target, lower: torch.dtype, op: str, entry: str, m: Materialized, d: Decision
) -> Outcome:
    """The oracle for the aten op. An entry point whose own sample does not fit the aten
    schema (``torch.nn.functional`` wrappers): the oracle on the aten call the entry point
    makes below Autocast with autocast off."""
    out = run_oracle(target, lower, op, m, d)
    if out.error is None or entry == op:
        return out
    calls, err = intercepted(target, lower, op, lambda: call(entry, m), enabled=False)
    if not calls:
        return Outcome(error=err or RuntimeError(f"{entry} does not reach {op}"))
    c = calls[0]
    with target.tensors():
        return run_oracle(target, lower, c.op, Materialized(tuple(c.args), dict(c.kwargs)))

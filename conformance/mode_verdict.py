"""Judging a mode's result against eager autocast (``test_modes.py``).

:func:`judge` decides (a pure function) whether a mode's result agrees with eager
autocast, or diverges as ``spec/jit.yaml`` ``mode_divergences`` declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autocast_spec.model import Divergence, Spec
from reference_impl.dtypes import dtype_name
from reference_impl.samples import output_tensors

DECLARED = "declared divergence: "  # the xfail reason's prefix, counted in the terminal summary


def observed_label(result: Any) -> str:
    """What a run produced, as the spec writes it: output dtypes (comma-joined) or ``error``."""
    if isinstance(result, BaseException):
        return "error"
    names = [dtype_name(t.dtype) for t in output_tensors(result)]
    return ",".join(names) if names else "no-tensor"


@dataclass(frozen=True)
class ModeJudgement:
    status: str  # same | declared | undeclared | stale
    detail: str

    @property
    def ok(self) -> bool:
        return self.status in ("same", "declared")


def find_divergence(spec: Spec, mode: str, op: str, dtype: str, inputs: str) -> Divergence | None:
    entry = spec.mode_divergences.get(mode)
    for d in entry.divergences if entry else ():
        if d.op == op and d.dtype in (None, dtype) and d.inputs == inputs:
            return d
    return None


def judge(
    mode: str, op: str, dtype: str, inputs: str, eager: str, observed: str, declared: Divergence | None
) -> ModeJudgement:
    """Pure decision: does ``observed`` (the mode's label) agree with eager, or diverge as declared?"""
    where = f"{mode} {op} (autocast {dtype}, {inputs} inputs)"
    when = f" [condition: {declared.condition}]" if declared is not None and declared.condition else ""
    if observed == eager:
        if declared is not None:
            return ModeJudgement(
                "stale",
                f"{where}: spec/jit.yaml declares a divergence ({declared.observed}){when} but the mode "
                f"now agrees with eager ({eager}); remove the entry from mode_divergences.{mode}",
            )
        return ModeJudgement("same", f"{where}: {eager}")
    if declared is not None and declared.observed_under(dtype) == observed:
        return ModeJudgement(
            "declared", f"{where}: {observed} instead of eager {eager}: {declared.reason}{when}"
        )
    hint = (
        f"declared as {declared.observed_under(dtype)!r}{when}, observed {observed!r}"
        if declared is not None
        else f"undeclared: add to spec/jit.yaml mode_divergences.{mode}: "
        f"{{op: {op}, dtype: {dtype}, inputs: {inputs}, observed: {observed}, reason: ...}}"
    )
    return ModeJudgement("undeclared", f"{where}: eager gives {eager}, {mode} gives {observed} ({hint})")

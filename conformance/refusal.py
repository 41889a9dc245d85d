"""Kernels that refuse their inputs natively on this host: not applicable here, never a failure.

Which inputs a kernel accepts can depend on the host, not on autocast: oneDNN builds
its bfloat16 LSTM primitive only on CPUs with AVX-512 or newer, so an AVX2 machine
refuses the same call that another machine runs. The verdict must not depend on that.

When eager autocast raises, the same call is made without autocast on the inputs the
reference's cast plan produces (the oracle: the plan's casts applied explicitly, the
kernel called below every Autocast key). If that raw call raises the same error, the
kernel refuses natively and nothing about autocast can be checked: the test is skipped
with the reason, in eager and in every mode alike. If the raw call runs, eager autocast
itself failed, and that is for the caller to report.
"""

from __future__ import annotations

import pytest
import torch

from reference_impl.samples import Materialized

from .runner import Outcome, run_oracle
from .target import Target


def error_text(e: BaseException | None) -> str:
    """An exception as one short line: its type and the first line of its message."""
    if e is None:
        return "no error"
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:300]}"


def refusal(autocast_error: BaseException | None, raw: Outcome) -> str | None:
    """The skip reason when ``autocast_error`` is the kernel's own refusal, else None.

    ``raw``: the call without autocast on the cast plan's inputs (:func:`raw_call`).
    """
    if autocast_error is None or raw.error is None:
        return None
    if error_text(autocast_error) != error_text(raw.error):
        return None
    return (
        "not applicable on this host: the kernel refuses these inputs natively (under autocast "
        f"and without it, on the reference's cast inputs): {error_text(raw.error)}"
    )


def skip_if_refused(autocast_error: BaseException | None, raw: Outcome) -> None:
    """``pytest.skip`` with the reason when the kernel refuses natively (see :func:`refusal`)."""
    reason = refusal(autocast_error, raw)
    if reason is not None:
        pytest.skip(reason)


def raw_call(target: Target, lower: torch.dtype, op: str, m: Materialized) -> Outcome:
    """``op`` called without autocast on the inputs the reference's cast plan gives it."""
    return run_oracle(target, lower, op, m)


# Checks that need the op's kernel to run (an output to compare): (category, kind),
# "" for every kind of the category.
NEEDS_OUTPUT = (
    ("numerics", ""),
    ("autograd", ""),
    ("eligibility", "other_device"),
    ("op_policy", "vmap"),
    ("op_policy", "grad"),
)


def intercept_only(target: Target, op: str) -> str | None:
    """The skip reason for output checks of an op whose kernel cannot run its samples
    (``intercept_only`` in spec/ops): its policy is checked below Autocast instead."""
    info = target.spec.op_info(op) if op else None
    if info is None or not info.intercept_only:
        return None
    return (
        f"{op}: no output to check: {info.intercept_only} (intercept_only at {info.loc}); "
        "its policy is checked by what reaches the kernel below Autocast (test_op_policy)"
    )


def needs_output(category: str, kind: str) -> bool:
    return (category, "") in NEEDS_OUTPUT or (category, kind) in NEEDS_OUTPUT

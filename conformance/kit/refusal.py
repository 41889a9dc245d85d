"""Host refusals: what is not applicable here, never a failure and never a pass.

Which inputs a kernel accepts can depend on the host, not on autocast: oneDNN builds its
bfloat16 LSTM primitive only on CPUs with AVX-512 or newer, so an AVX2 machine refuses
the call another machine runs. When eager autocast raises, the same call is made without
autocast on the inputs the reference's cast plan gives it (the oracle). If that raw call
raises the same error, the kernel refuses natively and nothing about autocast can be
checked: the check is not applicable here, in eager and in every mode alike. If the raw
call runs, eager autocast itself failed, and that is for the check to report.

Likewise a device whose autocast does not enable on this machine (torch.autocast warns
and disables itself without the hardware): the checks that need it to act do not apply.
"""

from __future__ import annotations

import warnings

import torch

from reference_impl.engine.dtypes import dtype_name

from ..target import Target
from .calls import Outcome
from .verdict import not_applicable, one_line


def refusal(autocast_error: BaseException | None, raw: Outcome) -> str | None:
    """The reason when ``autocast_error`` is the kernel's own refusal, else None.

    ``raw``: the call without autocast on the cast plan's inputs: the oracle's run
    (:func:`~.calls.run_oracle`)."""
    if autocast_error is None or raw.error is None or one_line(autocast_error) != one_line(raw.error):
        return None
    return (
        "not applicable on this host: the kernel refuses these inputs natively (under autocast "
        f"and without it, on the reference's cast inputs): {one_line(raw.error)}"
    )


def skip_if_refused(autocast_error: BaseException | None, raw: Outcome) -> None:
    reason = refusal(autocast_error, raw)
    if reason is not None:
        not_applicable(reason)


def intercept_only(target: Target, op: str) -> str | None:
    """Why output checks of ``op`` do not apply: its kernel cannot run its samples
    (``intercept_only`` in spec/ops); its policy is checked below Autocast instead."""
    info = target.spec.op_info(op) if op else None
    if info is None or not info.intercept_only:
        return None
    return (
        f"{op}: no output to check: {info.intercept_only} (intercept_only at {info.loc}); "
        "its policy is checked by what reaches the kernel below Autocast (test_op_policy)"
    )


def kernel_gap(target: Target, op: str, dtype: torch.dtype | None) -> str | None:
    """Why the backend's kernel cannot run ``op`` under ``dtype`` at all, where the op catalog
    declares it (``kernel_gaps``): checks that run the kernel do not apply, on every host
    alike (the verdict must not depend on which CPU the run meets). Policy-only runs no kernel."""
    info = target.spec.op_info(op) if op else None
    gap = info.kernel_gap(target.device, dtype_name(dtype)) if info is not None and dtype else None
    if gap is None or dtype is None or target.policy_only:
        return None
    where = info.loc  # type: ignore[union-attr]
    why = f"{gap.reason} [{gap.source}]"
    return f"{op}: declared kernel gap ({where}): no {target.device} kernel for {dtype_name(dtype)}: {why}"


def autocast_acts(target: Target, lower: torch.dtype) -> str | None:
    """None when the autocast under test really enables on this backend here, else why not. In
    a policy-only run (no device) ``torch.autocast`` raising counts as not enabling: torch-npu's
    asks its runtime for the dtypes it supports, which raises where no NPU is found."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            with target.autocast_impl(target.device, dtype=lower):
                on = torch.is_autocast_enabled(target.device)
        except Exception as e:
            if not target.policy_only:
                raise
            return f"torch.autocast({target.device!r}) raises on this machine (no device): {one_line(e)}"
    if on:
        return None
    why = "; ".join(str(x.message).splitlines()[0] for x in w) or "it stays disabled"
    return f"autocast({target.device!r}) does not enable on this machine ({why})"


def skip_if_autocast_raises(target: Target, dtype: torch.dtype | None) -> None:
    """Not applicable where the autocast under test cannot even be entered (a policy-only run in
    which ``torch.autocast`` asks the absent device's runtime, and it raises)."""
    why = autocast_acts(target, dtype) if target.policy_only and dtype is not None else None
    if why is not None and "raises on this machine" in why:
        not_applicable(why)


def require_autocast(target: Target, lower: torch.dtype) -> None:
    """Not applicable unless the autocast under test enables here (context tests need it)."""
    why = autocast_acts(target, lower)
    if why:
        not_applicable(why)

"""Observations of a call's outputs against the reference: their dtypes, then their values.

Both turn a :class:`~.calls.PolicyRun` into an :class:`~.verdict.Observation` for
:func:`~.verdict.expect`. Where the kernel refuses the inputs natively on this host
(:mod:`.refusal`), the check is not applicable here.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from autocast_spec.common import Tolerance
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.compare import bound, tensor_mismatch

from .calls import PolicyRun
from .case import Case
from .refusal import skip_if_refused
from .verdict import Observation, one_line


def dtype_observation(
    case: Case, run: PolicyRun, check: str, entry: str | None = None, both_raise_ok: bool = False
) -> Observation:
    """Native output dtypes against the reference's.

    ``both_raise_ok``: for input mixes the kernel itself may refuse (promote with float64),
    native and reference raising the same exception type conforms. The aten op is compared
    output by output; another entry point (which may return fewer outputs, e.g. a loss
    without its auxiliary tensors) by its result."""
    native, ref = run.native, run.expected
    seen = functools.partial(Observation, case, check, inputs=run.inputs, entry=entry)
    if both_raise_ok and native.error is not None and type(native.error) is type(ref.error):
        same = f"raises {type(native.error).__name__}"
        return seen("both raise", same, same)
    skip_if_refused(native.error, ref)
    if ref.error is not None:
        return seen(
            "the reference could not run this sample (fix the op catalog)",
            "the reference's output dtypes",
            f"the reference raised {one_line(ref.error)}",
        )
    if native.error is not None:
        return seen(
            "native autocast raised", ", ".join(ref.dtypes), one_line(native.error), facts={"plan": run.plan}
        )
    got, want = native.dtypes, ref.dtypes
    if (entry is not None and entry != case.op) or ref.first_only:
        got, want = got[:1], want[:1]
    return seen(
        "output dtype differs from the spec", ", ".join(want), ", ".join(got), facts={"plan": run.plan}
    )


def value_observation(
    case: Case, run: PolicyRun, check: str, tol: Tolerance | None, scratch: Sequence[int] = ()
) -> Observation:
    """Native outputs against the reference's: dtypes first, then bitwise when ``tol`` is None,
    else within it. Outputs listed in ``scratch`` (the catalog's ``scratch_outputs``:
    uninitialised workspaces) are compared by dtype and shape only."""
    dtypes = dtype_observation(case, run, check)
    if dtypes.expected != dtypes.observed:
        return dtypes
    got, want = run.native.tensors(), run.expected.tensors()
    seen = functools.partial(Observation, case, check, inputs=run.inputs)
    if len(got) != len(want):
        return seen("a different number of outputs", len(want), len(got))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape:
            return seen(f"output {i} has another shape", list(w.shape), list(g.shape))
        if i in scratch:
            continue
        mismatch = tensor_mismatch(w, g, tol, f"output {i}")
        if mismatch is not None:
            same_device = " on the same device" if tol is None else ""
            return seen(
                f"output {i} differs from the reference",
                f"equal to the reference ({bound(tol)}{same_device})",
                f"max abs error {mismatch.max_abs_error}",
                facts={"dtype": dtype_name(g.dtype), "plan": run.plan},
            )
    return seen("outputs equal the reference", "equal", "equal")

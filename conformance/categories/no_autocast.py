"""no_autocast: a backend without autocast warns once and runs every op as without it.

Cases: for a device file that states ``no_autocast`` (and only then), each dtype a user may
ask ``torch.autocast`` for (the device's default first), and one case of switching autocast
on directly (``torch.set_autocast_enabled``, which a user's ``torch.autocast`` never does).

Procedure: ``torch.mm`` on the backend's tensors inside ``torch.autocast(device, dtype)``, and
after enabling autocast directly.
Expectation: ``torch.autocast`` warns once (the device's ``unsupported_dtype`` message), stays
disabled, and ``mm`` runs in float32; enabled directly, ``mm`` falls through (runs in float32)
or raises the spec's error (``no_autocast.direct_enabling``): one finding, never one per op.
"""

from __future__ import annotations

import enum
import re
import warnings

import torch

from autocast_spec.dtype_rules import LOWER_DTYPES
from reference_impl.engine.dtypes import dtype_of
from reference_impl.harness.state import raw_autocast

from ..kit.calls import capture
from ..kit.case import Case
from ..kit.category import Category
from ..kit.verdict import Observation, one_line
from ..target import Target

TORCH_AUTOCAST = "no_autocast.torch_autocast"
DIRECT_ENABLING = "no_autocast.direct_enabling"


class Asked(enum.Enum):
    """How a backend without autocast is asked for it."""

    TORCH_AUTOCAST = "no_autocast"  # torch.autocast(device, dtype), as a user asks
    DIRECT = "direct_enabling"  # torch.set_autocast_enabled(device, True)


def cases(target: Target) -> list[Case[Asked]]:
    """The dtypes a user may ask ``torch.autocast`` for (the default first), and one direct case."""
    ds = target.device_spec
    if ds.no_autocast is None:  # a backend with autocast: the context category's tests
        return []
    asked = (ds.default_dtype, *(d for d in LOWER_DTYPES if d != ds.default_dtype))
    out = [Case("no_autocast", target.device, dtype_of(d), params=Asked.TORCH_AUTOCAST) for d in asked]
    return [*out, Case("no_autocast", target.device, dtype_of(ds.default_dtype), params=Asked.DIRECT)]


CATEGORY = Category(
    "no_autocast",
    __doc__,
    checks=(TORCH_AUTOCAST, DIRECT_ENABLING),
    generators=(cases,),
    only_where_declared=True,
)


def no_autocast(target: Target, case: Case[Asked]) -> Observation:
    """``torch.autocast`` warns once and runs ``mm`` as without it; directly enabled, ``mm``
    falls through or raises the spec's error (``no_autocast.direct_enabling``)."""
    d, lower, ds = target.device, case.lower, target.device_spec
    assert ds.no_autocast is not None and ds.unsupported_dtype is not None
    with target.tensors(), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        x = torch.ones(4, 4, device=f"{d}:0")  # an index: see conformance/target._fake_index
        direct = case.params is Asked.DIRECT
        with raw_autocast(d, lower) if direct else target.autocast_impl(d, dtype=lower):
            on, out = torch.is_autocast_enabled(d), capture(lambda: torch.mm(x, x))
    ran = one_line(out.error) if out.error is not None else f"runs, {', '.join(out.dtypes)}"
    if direct:
        na = ds.no_autocast
        want = f"raises {na.text(d)}" if na.direct_enabling == "error" else "runs, float32"
        raised = na.direct_enabling == "error" and out.error is not None and re.search(na.text(d), ran)
        what = f"torch.mm on {d} tensors after torch.set_autocast_enabled({d!r}, True)"
        rule = f"no_autocast.direct_enabling: {na.direct_enabling} ({na.loc})"
        return Observation(case, DIRECT_ENABLING, what, want, want if raised else ran, facts={"rule": rule})
    warned = sum(ds.unsupported_dtype.text(d).split(".")[0] in str(m.message) for m in w)
    return Observation(
        case,
        TORCH_AUTOCAST,
        f"torch.autocast({d!r}, dtype={lower}) on a backend without autocast",
        {"warnings": 1, "enabled": False, "torch.mm": "runs, float32"},
        {"warnings": warned, "enabled": on, "torch.mm": ran},
        facts={"rule": f"no_autocast ({ds.no_autocast.loc})"},
    )

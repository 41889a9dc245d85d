"""Spec -> cases for the semantic categories: the weight-cast cache per op, thread-local
state per field, custom_fwd/custom_bwd combinations and custom ops.

Like :mod:`conformance.cases`, every generator is a pure function of the target and
reads the rules it expands from the spec (``rules.cache``, ``rules.context``,
``rules.eligibility``, ``rules.custom_ops``); no op name is written here.
"""

from __future__ import annotations

from autocast_spec.model import Policy

from .cases import Case, _info, device_needed
from .target import Target

# Cache scenarios per op (rules.cache). Each names the tensors the op is given and what
# the rule says about them; the check derives "cached or not" from the spec's rules.
CACHE_KINDS = (
    "weights",  # float32 leaves that require grad: cached (source_dtypes, leaf_only, requires_grad_only)
    "no_grad_inputs",  # float32 leaves without requires_grad (requires_grad_only)
    "non_leaf",  # float32 non-leaf tensors that require grad (leaf_only)
    "view",  # a detached view that requires grad: a leaf, but a view (exclude_views)
    "nested_exit",  # kept across an inner exit, gone after the outermost one (cleared_at)
    "cache_disabled",  # autocast(cache_enabled=False): nothing cached
    "other_dtype",  # a nested region with the device's other lower dtype (key)
)

# The thread-local fields rules.context names, checked in a new thread.
THREAD_FIELDS = ("enabled", "dtype", "cache_enabled", "nesting")
THREAD_WHEN = ("parent_inside", "parent_after")

# custom_fwd / custom_bwd: where the function is applied, its cast_inputs, its input.
CUSTOM_WHERE = ("inside", "outside")
CUSTOM_CAST = ("none", "float32", "lower")
CUSTOM_INPUTS = ("float16", "bfloat16", "float32", "float64", "int64", "other_device", "kwarg")
CUSTOM_NESTED = tuple((o, i) for o in CUSTOM_CAST for i in CUSTOM_CAST)

# torch.library.custom_op + register_autocast: cast target and input kind.
CUSTOM_OP_CAST = ("float32", "lower")
CUSTOM_OP_INPUTS = ("float32", "lower", "float64", "int64", "other_device", "disabled")


def cache_policies(target: Target) -> tuple[Policy, ...]:
    return target.spec.rules.cache.policies


def cache(target: Target) -> list[Case]:
    """Every op of the policies rules.cache names, with its first sample, per cache scenario."""
    out = []
    for dtype in target.dtypes:
        for pol in cache_policies(target):
            for op in target.device_spec.ops_with(pol):
                if _info(target, op) is None:
                    continue
                for kind in CACHE_KINDS:
                    if kind == "other_dtype" and len(target.device_spec.supported_dtypes) < 2:
                        continue
                    out.append(Case("cache", target.device, dtype, pol.value, op, op, kind=kind))
    return out


def threads(target: Target) -> list[Case]:
    """Each thread-local field, in a thread started inside the parent's region and after it,
    and the parent's state while a child thread sits in its own region."""
    out = []
    for dtype in target.dtypes:
        for when in THREAD_WHEN:
            for field in THREAD_FIELDS:
                out.append(Case("threads", target.device, dtype, kind=f"{when}-{field}"))
        out.append(Case("threads", target.device, dtype, kind="child_region-parent_state"))
    return out


def custom_function(target: Target) -> list[Case]:
    """custom_fwd/custom_bwd: inside/outside a region x cast_inputs x input kind, and nesting."""
    out = []
    for dtype in target.dtypes:
        for where in CUSTOM_WHERE:
            for cast in CUSTOM_CAST:
                for inp in CUSTOM_INPUTS:
                    out.append(
                        Case("custom_function", target.device, dtype, kind=f"{where}-cast_{cast}-{inp}")
                    )
        for outer, inner in CUSTOM_NESTED:
            out.append(
                Case("custom_function", target.device, dtype, kind=f"nested-outer_{outer}-inner_{inner}")
            )
    return out


def custom_op(target: Target) -> list[Case]:
    """A torch.library.custom_op with register_autocast, on the devices rules.custom_ops names."""
    if target.device not in target.spec.rules.custom_ops.register_autocast_devices:
        return []
    out = []
    for dtype in target.dtypes:
        for cast in CUSTOM_OP_CAST:
            for inp in CUSTOM_OP_INPUTS:
                out.append(Case("custom_op", target.device, dtype, kind=f"cast_{cast}-{inp}"))
    return out


def transition_pool(target: Target, dtype: str) -> list[Case]:
    """The ops the state-transition machine draws from: the cache category's ops."""
    return [
        c
        for c in cache(target)
        if c.dtype == dtype and c.kind == "weights" and not device_needed(target, c.op)
    ]

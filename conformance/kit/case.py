"""The typed test case, and the views of the spec that every category's generators share.

A :class:`Case` is one generated test: the device, the autocast dtype, the op and the
entry point called, and the category's own parameters as a typed :class:`Variant`. The
test id is built from these fields (``device-dtype-policy-op-entry-sampleN-label``); no
code ever parses it back. A generator is a pure function of the target, so the same spec
on the same torch gives the same cases in the same order (pytest-xdist workers agree).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from autocast_spec.catalog import ListArg, OpInfo, Sample, TensorArg
from autocast_spec.model import Policy
from reference_impl.engine.torch_registry import op_exists

from ..target import Target

# An input mix: the dtypes given to a sample's test-float tensors, in order (the last one
# repeats). "lower" is the autocast dtype under test, "foreign" the other lower dtype.
Mix = tuple[str, ...]


class Variant(Protocol):
    """A category's own parameters of a case (a frozen dataclass); ``label`` ends the test id."""

    @property
    def label(self) -> str: ...


@dataclass(frozen=True)
class Case:
    """One generated test: what to call, on which dtype, and the category's parameters."""

    category: str
    device: str
    dtype: str = ""  # the lower dtype under test ("" where none applies)
    policy: str = ""
    op: str = ""
    entry: str = ""  # the entry point called (torch.mm, Tensor.mm, an in-place overload), or the op
    sample: int = 0
    variant: Variant | None = None
    mix: Mix = ()
    seed: int = 0  # the values' seed (Hypothesis draws it)

    @property
    def label(self) -> str:
        """The id's trailing part: the variant's label."""
        return self.variant.label if self.variant is not None else ""

    @property
    def id(self) -> str:
        parts = [self.device, self.dtype, self.policy, self.op]
        if self.entry and self.entry != self.op:
            parts.append(self.entry)
        if self.sample:
            parts.append(f"sample{self.sample}")
        parts.append(self.label)
        return "-".join(p for p in parts if p)

    @property
    def markers(self) -> tuple[str, ...]:
        return tuple(m for m in (self.category, self.policy) if m)


# The input mix per policy that makes the policy visible: a lower op gets float32 inputs,
# an fp32 op gets lower inputs, promote gets one of each.
DISCRIMINATING_MIX: dict[Policy, Mix] = {
    Policy.LOWER_PRECISION_FP: ("float32",),
    Policy.FP32: ("lower",),
    Policy.FP32_SET_OPT_DTYPE: ("lower",),
    Policy.FP32_APPEND_DTYPE: ("lower",),
    Policy.PROMOTE: ("lower", "float32"),
    Policy.LOWER_FIRST_ARG: ("float32",),
    Policy.BANNED: ("float32",),
}


def listed(target: Target, dtype: str | None = None) -> list[tuple[str, Policy]]:
    """The device's listed ops with their policy, by name: under ``dtype`` when given
    (``by_dtype``; an op that passes uncast under it is left out), else as listed."""
    ops = sorted((op, e) for op, e in target.device_spec.ops.items() if target.selects(op))
    if dtype is None:
        return [(op, e.policy) for op, e in ops]
    return [(op, p) for op, e in ops if (p := e.policy_under(dtype)) is not None]


def catalogued(target: Target, op: str) -> OpInfo | None:
    """The op's catalog entry, if it has samples and the installed torch has the op."""
    info = target.spec.op_info(op)
    return info if info is not None and info.samples and op_exists(op) else None


@dataclass(frozen=True)
class ListedOp:
    """One (dtype, listed op) pair a generator makes cases for."""

    dtype: str
    op: str
    policy: Policy
    info: OpInfo

    def case(self, target: Target, category: str, **fields: object) -> Case:
        """A case of ``category`` for this op: the op called itself, with its policy's
        discriminating mix unless ``fields`` say otherwise."""
        values: dict[str, object] = {"entry": self.op, "mix": DISCRIMINATING_MIX[self.policy], **fields}
        return Case(category, target.device, self.dtype, self.policy.value, self.op, **values)  # type: ignore[arg-type]


def listed_ops(
    target: Target, policies: tuple[Policy, ...] | None = None, banned: bool = False
) -> Iterator[ListedOp]:
    """Every dtype under test x every listed, catalogued op (of ``policies`` when given;
    banned ops only with ``banned``): the loop every per-op generator starts from."""
    for dtype in target.dtypes:
        for op, pol in listed(target, dtype):
            if policies is not None and pol not in policies:
                continue
            if pol is Policy.BANNED and not banned:
                continue
            info = catalogued(target, op)
            if info is not None:
                yield ListedOp(dtype, op, pol, info)


def device_needed(target: Target, op: str) -> str | None:
    """Why ``op`` cannot be called here at all: its Autocast kernel needs the absent device."""
    info = target.spec.op_info(op)
    if info is None or not info.needs_device or not target.policy_only:
        return None
    return (
        f"{op}: its Autocast kernel calls the device runtime (needs_device at {info.loc}); "
        f"it needs a real {target.device} device"
    )


def count_test_floats(sample: Sample) -> int:
    """How many test-float tensors (those an input mix sets) ``sample`` has."""

    def count(a: object) -> int:
        if isinstance(a, TensorArg):
            return 1 if a.is_test_float else 0
        if isinstance(a, ListArg):
            return sum(count(x) for x in a.items)
        return 0

    return sum(count(a) for a in (*sample.args, *sample.kwargs.values()))


def sentinel_op(target: Target, policy: Policy = Policy.LOWER_PRECISION_FP) -> str | None:
    """The first op (by name) of ``policy`` with a sample of at least two test-float tensors,
    else one: the op the context, cache and mode tests watch to see whether autocast acts.
    An op whose policy depends on the dtype (``by_dtype``, IPEX) is not taken: the tests
    watch it under every dtype."""
    ds = target.device_spec
    ops = [op for op in ds.ops_with(policy) if catalogued(target, op) and not ds.ops[op].by_dtype]
    for op in ops:
        if count_test_floats(target.spec.ops[op].samples[0]) > 1:
            return op
    return ops[0] if ops else None

"""The one typed test case of the suite, and the views of the spec that every generator shares.

A :class:`Case` is one generated test: its category, the device, the autocast dtype (a
``torch.dtype``), the op's policy, the op and the entry point called, the sample, the input
mix, and the category's own typed parameters (``params``, a frozen dataclass). Every case
of every category is this one type.

Test ids are built from the typed fields, one family for all: parts joined by ``-``, an empty
part left out. The standard parts are :data:`STANDARD_ID` (``device-dtype-policy-op-entry-
sampleN``) followed by the parameters' own template (``ID``, a ``str.format`` template over
their fields; by default the fields in order); parameters whose id names something else
first (an execution mode's cases name the mode first) give the whole template instead
(``WHOLE_ID``). No code ever parses an id back. A generator is a pure function of the
target, so the same spec on the same torch gives the same cases in the same order
(pytest-xdist workers agree).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Generic, TypeVar

import torch

from autocast_spec.catalog import ListArg, OpInfo, Sample, TensorArg
from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name
from reference_impl.engine.torch_registry import op_exists

from ..target import Target


class MixRole(enum.Enum):
    """An input dtype named by its role under the autocast dtype tested."""

    LOWER = "lower"  # the autocast dtype under test
    FOREIGN = "foreign"  # the other lower dtype (float16 under bfloat16 autocast, and the reverse)


# An input mix: the dtypes given to a sample's test-float tensors, in order (the last one repeats).
MixEntry = torch.dtype | MixRole
Mix = tuple[MixEntry, ...]


class Listing(enum.Enum):
    """The policy part of a case for an op the device lists under no policy."""

    UNLISTED = "unlisted"  # the spec does not list it
    NONE = "none"  # listed to pass on uncast (a higher-order operator's kernel)
    REGISTERED_ONLY = "registered_only"  # a vendor's operator listed without a policy


PolicyPart = Policy | Listing


def shown(as_text: str, otherwise: str = "", **more: Any) -> Any:
    """A boolean parameter field and its text in the id (``as_text`` when true)."""
    return field(metadata={"id": (as_text, otherwise)}, **more)


def omitted(default: Any, fmt: str = "-{}") -> Any:
    """A parameter field left out of the id at ``default``, else shown through ``fmt``."""
    return field(default=default, metadata={"id_omit": default, "id_fmt": fmt})


class IdText:
    """A value as ids write it, for ``str.format`` (attribute access keeps the wrapping)."""

    def __init__(self, value: Any) -> None:
        self._wrapped = value

    def __format__(self, spec: str) -> str:
        v = self._wrapped
        if v is None:
            return ""
        if isinstance(v, torch.dtype):
            return dtype_name(v)
        if isinstance(v, enum.Enum):
            return str(v.value)
        return format(v, spec)

    def __getattr__(self, name: str) -> IdText:
        return IdText(getattr(self._wrapped, name))


def _field_texts(params: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(params):
        if f.name.startswith("_") or not f.repr:
            continue
        v = getattr(params, f.name)
        if "id" in f.metadata:
            out[f.name] = f.metadata["id"][0] if v else f.metadata["id"][1]
        elif "id_omit" in f.metadata:
            out[f.name] = "" if v == f.metadata["id_omit"] else f.metadata["id_fmt"].format(IdText(v))
        else:
            out[f.name] = IdText(v)
    return out


def params_id(params: Any, case_fields: Mapping[str, Any] | None = None) -> str:
    """The parameters' part of an id: their ``ID`` template, else their fields joined by ``-``."""
    if params is None:
        return ""
    if isinstance(params, enum.Enum):
        return str(params.value)
    assert is_dataclass(params), f"case parameters are frozen dataclasses or enums, not {params!r}"
    texts = {**(case_fields or {}), **_field_texts(params)}
    template: str | None = getattr(params, "ID", None)
    if template is None:
        own = _field_texts(params)
        return "-".join(s for s in (format(t) for t in own.values()) if s)
    return template.format(**texts)


P = TypeVar("P")

# The standard parts of an id, before the parameters' own (an empty part is left out).
STANDARD_ID = ("{device}", "{dtype}", "{policy}", "{op}", "{entry}", "{sample}")


@dataclass(frozen=True)
class Case(Generic[P]):
    """One generated test: what to call, on which dtype, and the category's typed parameters."""

    category: str
    device: str
    dtype: torch.dtype | None = None  # the lower dtype under test (None where none applies)
    policy: PolicyPart | None = None
    op: str = ""
    entry: str = ""  # the entry point called (torch.mm, Tensor.mm, an in-place overload), or the op
    sample: int = 0
    params: P | None = None
    mix: Mix = ()
    seed: int = 0  # the values' seed (Hypothesis draws it)

    def _texts(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "dtype": IdText(self.dtype),
            "policy": IdText(self.policy),
            "op": self.op,
            "entry": self.entry if self.entry != self.op else "",
            "sample": f"sample{self.sample}" if self.sample else "",
        }

    @property
    def id(self) -> str:
        texts = self._texts()
        if getattr(self.params, "WHOLE_ID", False):
            return params_id(self.params, texts)
        parts = [format(t) for t in (template.format(**texts) for template in STANDARD_ID)]
        parts.append(params_id(self.params))
        return "-".join(p for p in parts if p)

    @property
    def params_label(self) -> str:
        """The parameters' part of the id (a failure's headline shows it)."""
        return params_id(self.params, self._texts())

    @property
    def lower(self) -> torch.dtype:
        """The autocast dtype under test, of a case that has one."""
        assert self.dtype is not None, f"{self.category} case {self.id} has no autocast dtype"
        return self.dtype

    @property
    def dtype_text(self) -> str:
        """The autocast dtype as the spec writes it ("" where none applies)."""
        return dtype_name(self.dtype) if self.dtype is not None else ""

    @property
    def markers(self) -> tuple[str, ...]:
        """The category, the policy, and the run markers the parameters ask for (``markers``)."""
        own = tuple(getattr(self.params, "markers", ()))
        return tuple(m for m in (self.category, self.policy.value if self.policy else "", *own) if m)


# The input mix per policy that makes the policy visible: a lower op gets float32 inputs,
# an fp32 op gets lower inputs, promote gets one of each.
DISCRIMINATING_MIX: dict[Policy, Mix] = {
    Policy.LOWER_PRECISION_FP: (torch.float32,),
    Policy.FP32: (MixRole.LOWER,),
    Policy.FP32_SET_OPT_DTYPE: (MixRole.LOWER,),
    Policy.FP32_APPEND_DTYPE: (MixRole.LOWER,),
    Policy.PROMOTE: (MixRole.LOWER, torch.float32),
    Policy.LOWER_FIRST_ARG: (torch.float32,),
    Policy.BANNED: (torch.float32,),
}


def listed(target: Target, dtype: torch.dtype | None = None) -> list[tuple[str, Policy]]:
    """The device's listed ops with their policy, by name: under ``dtype`` when given
    (``by_dtype``; an op that passes uncast under it is left out), else as listed."""
    ops = sorted((op, e) for op, e in target.device_spec.ops.items() if target.selects(op))
    if dtype is None:
        return [(op, e.policy) for op, e in ops]
    name = dtype_name(dtype)
    return [(op, p) for op, e in ops if (p := e.policy_under(name)) is not None]


def catalogued(target: Target, op: str) -> OpInfo | None:
    """The op's catalog entry, if it has samples and the installed torch has the op."""
    info = target.spec.op_info(op)
    return info if info is not None and info.samples and op_exists(op) else None


@dataclass(frozen=True)
class ListedOp:
    """One (dtype, listed op) pair a generator makes cases for."""

    dtype: torch.dtype
    op: str
    policy: Policy
    info: OpInfo

    def case(self, target: Target, category: str, **fields: Any) -> Case[Any]:
        """A case of ``category`` for this op: the op called itself, with its policy's
        discriminating mix unless ``fields`` say otherwise."""
        values: dict[str, Any] = {"entry": self.op, "mix": DISCRIMINATING_MIX[self.policy], **fields}
        return Case(category, target.device, self.dtype, self.policy, self.op, **values)


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

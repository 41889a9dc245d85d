"""The op catalog's model (``spec/ops/``): how to call each op, and how to compare it.

Device-independent facts: sample inputs in a small declarative argument language,
the public functions that reach an op, tolerances, and where torch itself cannot run
an op (kernel and functorch gaps).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from .common import SourceLoc, Tolerance, frozen_map


@dataclass(frozen=True)
class TensorArg:
    """A tensor to materialize. ``dtype`` "float" means: the floating dtype under test."""

    shape: tuple[int, ...]
    dtype: str = "float"
    domain: str = "normal"
    requires_grad: bool = False
    constant: bool = False  # data, not a differentiable input: never made to require grad

    @property
    def is_test_float(self) -> bool:
        return self.dtype == "float"


@dataclass(frozen=True)
class DtypeArg:
    """A ``torch.dtype`` literal argument, e.g. ``dtype=torch.float16``."""

    name: str


@dataclass(frozen=True)
class ListArg:
    items: tuple[Arg, ...]


@dataclass(frozen=True)
class Literal:
    value: Any  # int, float, bool, str or None


Arg = Union[TensorArg, DtypeArg, ListArg, Literal]  # noqa: UP007 (a runtime alias)


@dataclass(frozen=True)
class Sample:
    args: tuple[Arg, ...]
    kwargs: Mapping[str, Arg]
    loc: SourceLoc
    note: str = ""


@dataclass(frozen=True)
class EntryPoint:
    """A public function reaching an op: ``torch.mm``, ``Tensor.mm``, ``torch.nn.functional.linear``.

    With ``sample`` None the entry point takes the op's own sample arguments.
    """

    name: str
    sample: Sample | None = None


@dataclass(frozen=True)
class KernelGap:
    """A device/dtype where the native kernel cannot run the op at all (not autocast's doing)."""

    device: str
    dtype: str
    reason: str
    source: str = ""  # its public link, or that none exists and the release it was seen on


@dataclass(frozen=True)
class FunctorchGap:
    """A transform (vmap | grad) under which the op's first sample does not keep its policy."""

    transform: str
    reason: str  # why, with its source
    devices: tuple[str, ...] = ()  # empty: every device


@dataclass(frozen=True)
class OpInfo:
    """Device-independent facts about one op: how to call it, how to compare it."""

    op: str
    samples: tuple[Sample, ...]
    entry_points: tuple[EntryPoint, ...]
    loc: SourceLoc
    tolerance: Mapping[str, Tolerance] = field(default_factory=frozen_map)
    append_dtype_target: str | None = None  # fp32_append_dtype: the overload called
    nondeterministic: bool = False
    fake_kernel: bool = True  # False: no FakeTensor kernel; runs only on real hardware
    needs_device: bool = False  # True: even its Autocast kernel calls the device runtime
    intercept_only: str = ""  # why the kernel cannot run the samples: policy checked below Autocast only
    functorch_gaps: tuple[FunctorchGap, ...] = ()
    kernel_gaps: tuple[KernelGap, ...] = ()
    scratch_outputs: tuple[int, ...] = ()  # workspace outputs: compared by dtype and shape only
    no_derivative: str = ""  # why the op has no derivative at all (autograd checks do not apply)
    note: str = ""

    def functorch_gap(self, transform: str, device: str) -> str | None:
        """Why the op does not keep its policy under ``transform`` on ``device`` (None: it must)."""
        here = (g for g in self.functorch_gaps if not g.devices or device in g.devices)
        return next((g.reason for g in here if g.transform == transform), None)

    def kernel_gap(self, device: str, dtype: str) -> KernelGap | None:
        return next((g for g in self.kernel_gaps if g.device == device and g.dtype == dtype), None)

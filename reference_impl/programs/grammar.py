"""What a generated program may use on one device, read from the spec and the installed torch.

The autocast entry points come from ``spec/python_surface.yaml`` by role (regions, the
``custom_fwd``/``custom_bwd`` decorators, the cache setter, the state getters); the devices and
their dtypes from the device files; the ops from the catalog (:mod:`.menu`); the higher-order
ops from what the installed torch has (:class:`Available`, never a release number).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from functools import cached_property

import torch

from autocast_spec.model import Spec
from autocast_spec.surface import EntryPointInfo, Role

from ..harness.samples import resolve_entry_point
from ..harness.state import quiet
from .menu import Menu, menu_for

# A focus: one dimension of the grammar a drawn program must hold (besides what else it draws),
# so that a small budget still covers every dimension. The context's foci set the program's
# context; the others add one statement of their kind under the program's first region.
CONTEXT_FOCI = ("module", "train", "second_shape", "second_state")
STATEMENT_FOCI = (
    "decorator",
    "legacy",
    "nested",
    "helpers",
    "break",
    "escape",
    "custom_function",
    "checkpoint",
    "cache",
    "cond",
    "flex",
    "nested_compile_region",
)
FOCI = CONTEXT_FOCI + STATEMENT_FOCI


@dataclass(frozen=True)
class Limits:
    """How large a program may grow (Hypothesis shrinks toward far smaller ones)."""

    max_ops: int = 4  # op calls (custom Functions and flex_attention included)
    max_statements: int = 8
    max_calls: int = 3  # helper calls nested in one another
    max_regions: int = 3  # autocast regions nested in one another


@dataclass(frozen=True)
class Available:
    """The higher-order constructs the installed torch has."""

    cond: bool
    flex_attention: bool
    nested_compile_region: bool  # torch.compiler.nested_compile_region (invoke_subgraph)
    compiler_disable: bool

    @staticmethod
    def installed() -> Available:
        return Available(
            cond=hasattr(torch, "cond"),
            flex_attention=importlib.util.find_spec("torch.nn.attention.flex_attention") is not None,
            nested_compile_region=hasattr(torch.compiler, "nested_compile_region"),
            compiler_disable=hasattr(torch.compiler, "disable"),
        )


def entries(spec: Spec, role: Role, device: str) -> tuple[EntryPointInfo, ...]:
    """The surface's entry points of ``role`` usable for ``device``, in the spec's order."""
    return tuple(e for e in spec.surface.entry_points if e.role is role and e.bound_to(device))


def autocast_available(spec: Spec, device: str) -> bool:
    """Whether torch's autocast knows ``device`` (the surface's ``available`` entry point)."""
    check = next((e for e in spec.surface.entry_points if e.role is Role.AVAILABLE), None)
    if check is None:
        return False
    try:
        with quiet():
            return bool(resolve_entry_point(check.name)(device))
    except Exception:  # a device name this torch rejects outright
        return False


def one(spec: Spec, role: Role) -> str:
    """The name of the device-independent entry point of ``role``."""
    found = next((e.name for e in spec.surface.entry_points if e.role is role and e.device is None), None)
    if found is None:
        raise LookupError(f"spec/python_surface.yaml lists no device-independent entry point of role {role}")
    return found


@dataclass(frozen=True)
class StateEntryPoints:
    """The entry points a script reads autocast's state with, and puts it back with."""

    enabled: str
    dtype: str
    cache: str
    increment: str
    decrement: str
    set_enabled: str
    set_dtype: str
    set_cache: str
    clear_cache: str

    @staticmethod
    def of(spec: Spec) -> StateEntryPoints:
        return StateEntryPoints(
            *(
                one(spec, role)
                for role in (
                    Role.ENABLED_GETTER,
                    Role.DTYPE_GETTER,
                    Role.CACHE_GETTER,
                    Role.NESTING_INCREMENT,
                    Role.NESTING_DECREMENT,
                    Role.ENABLED_SETTER,
                    Role.DTYPE_SETTER,
                    Role.CACHE_SETTER,
                    Role.CACHE_CLEAR,
                )
            )
        )


@dataclass(frozen=True)
class Grammar:
    """Everything the strategies draw from for programs on ``device`` under ``dtype``."""

    spec: Spec
    device: str
    dtype: str
    limits: Limits = field(default_factory=Limits)
    available: Available = field(default_factory=Available.installed)

    def __repr__(self) -> str:  # short: Hypothesis shows the strategy's arguments
        return f"Grammar({self.device!r}, {self.dtype!r}, spec for torch {self.spec.torch_version})"

    @property
    def menu(self) -> Menu:
        return menu_for(self.spec, self.device, self.dtype)

    def regions(self, device: str) -> tuple[EntryPointInfo, ...]:
        """The region entry points for ``device``: the generic ones, then its legacy alias."""
        return entries(self.spec, Role.REGION, device)

    def dtypes(self, device: str) -> tuple[str, ...]:
        """``device``'s autocast dtypes, the one under test (or the default) first."""
        d = self.spec.device(device)
        first = self.dtype if device == self.device else d.default_dtype
        return (first, *(x for x in d.supported_dtypes if x != first))

    @cached_property
    def other_devices(self) -> tuple[str, ...]:
        """The spec's other devices whose autocast this torch knows (a nested region of another
        device type)."""
        return tuple(
            d for d in sorted(self.spec.devices) if d != self.device and autocast_available(self.spec, d)
        )

    @property
    def state_devices(self) -> tuple[str, ...]:
        """The devices whose autocast state a script records."""
        return (self.device, *self.other_devices)

    @property
    def custom_function(self) -> tuple[str, str] | None:
        """The ``custom_fwd`` and ``custom_bwd`` decorators for the device (a pair of the
        surface's decorators whose names differ in ``fwd``/``bwd``), or None."""
        decorators = [e.name for e in entries(self.spec, Role.DECORATOR, self.device) if e.device is None]
        return next(
            ((f, b) for f in decorators for b in decorators if f != b and f.replace("fwd", "bwd") == b),
            None,
        )

    @property
    def cache_setter(self) -> str | None:
        found = entries(self.spec, Role.CACHE_SETTER, self.device)
        return found[0].name if found else None

    @property
    def state_entry_points(self) -> StateEntryPoints:
        return StateEntryPoints.of(self.spec)

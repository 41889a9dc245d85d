"""The model of ``spec/python_surface.yaml``: autocast's public Python entry points and
``torch.autocast``'s argument checks, for the release the spec is read for.

Only :func:`autocast_spec.builders.build_surface` makes these (entries outside the release
left out, ``deprecated`` compared with the release); the suite's ``python_surface`` category
reads them (``conformance/categories/python_surface.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

from .vocabulary import ArgumentOutcome, CompiledOutcome, RegionArgument, WrongValue


class Role(str, enum.Enum):
    """How an entry point is used, and so how the suite calls it once (``entry_point`` checks)."""

    REGION = "region"  # a context manager: entered and left
    DECORATOR = "decorator"  # custom_fwd / custom_bwd: applied to a function
    ENABLED_GETTER = "enabled_getter"
    ENABLED_SETTER = "enabled_setter"  # given the value its device holds
    DTYPE_GETTER = "dtype_getter"
    DTYPE_SETTER = "dtype_setter"  # given the value its device holds
    AVAILABLE = "available"  # asked about the device under test
    CACHE_GETTER = "cache_getter"
    CACHE_SETTER = "cache_setter"  # given the value autocast holds
    CACHE_CLEAR = "cache_clear"
    NESTING_INCREMENT = "nesting_increment"  # called, then the nesting decremented back
    NESTING_DECREMENT = "nesting_decrement"  # called after the nesting was incremented
    REGISTRATION = "registration"  # torch.library.register_autocast for a fresh custom op

    def __str__(self) -> str:
        return self.value


# Roles that only read or write autocast's thread-local state for their device's key: they
# need no runtime of that device, so every backend runs their entry_point check.
STATE_ROLES = frozenset({Role.ENABLED_GETTER, Role.ENABLED_SETTER, Role.DTYPE_GETTER, Role.DTYPE_SETTER})


@dataclass(frozen=True)
class UnderCompile:
    """What a user sees under ``torch.compile(fullgraph=True)`` where it is not eager's.

    ``raises``: the error type and message (Dynamo re-raises an error of a region's
    constructor as its own, naming the original type in the message); ``graph_break``: Dynamo
    does not trace the call (``message``: a substring of the graph break's first line), and
    without ``fullgraph`` the call runs eagerly.
    """

    outcome: CompiledOutcome
    message: str
    cited: str  # its public source, or that there is none and where it was seen
    error: str | None = None  # raises: the exception type's name


@dataclass(frozen=True)
class EntryPointInfo:
    """One public autocast entry point of the Python surface."""

    name: str  # torch.autocast, torch.get_autocast_cpu_dtype...
    role: Role
    alias_of: str | None = None
    device: str | None = None  # the device a legacy entry point or alias is bound to
    positional: tuple[str, ...] = ()
    deprecated: bool = False  # deprecated in the release read: it must warn with ``warning``
    deprecated_in: str | None = None  # the release that deprecated it
    warning: str | None = None
    compiled: UnderCompile | None = None  # a dtype getter Dynamo does not trace (graph_break)

    def bound_to(self, device: str) -> bool:
        """Bound to ``device``, or to none (then it takes the device as an argument)."""
        return self.device in (None, device)


@dataclass(frozen=True)
class ArgumentCheck:
    """What ``torch.autocast`` does with one argument of the wrong kind."""

    argument: RegionArgument
    value: WrongValue
    # unsupported_dtype: as the device's unsupported_dtype rule says (resolved, it may be "accepted")
    outcome: ArgumentOutcome | Literal["accepted"]
    error: str | None
    message: str | None
    source: str
    compiled: UnderCompile | None = None  # the error under torch.compile, where not eager's


@dataclass(frozen=True)
class NotListed:
    """A public name of torch's autocast modules that is deliberately not an entry point."""

    name: str
    reason: str


@dataclass(frozen=True)
class Surface:
    entry_points: tuple[EntryPointInfo, ...] = ()
    validation: tuple[ArgumentCheck, ...] = ()
    not_listed: tuple[NotListed, ...] = ()

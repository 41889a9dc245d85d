"""The model of ``spec/python_surface.yaml``: autocast's public Python entry points and
``torch.autocast``'s argument checks, for the release the spec is read for.

Only :func:`autocast_spec.builders.build_surface` makes these (entries outside the release
left out, ``deprecated`` compared with the release); the suite's ``python_surface`` category
reads them (``conformance/categories/python_surface.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal, get_args

from .common import SourceLoc
from .vocabulary import (
    ArgumentForm,
    ArgumentOutcome,
    CheckedArgument,
    CompiledOutcome,
    FormName,
    FormOutcome,
    RegionForm,
    WrongValue,
)


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


class ParameterKind(str, enum.Enum):
    """How a parameter may be passed (Python's ``inspect.Parameter`` kinds that autocast uses)."""

    POSITIONAL_OR_KEYWORD = "positional_or_keyword"
    POSITIONAL_ONLY = "positional_only"  # a C function's argument, or before ``/``
    KEYWORD_ONLY = "keyword_only"  # after ``*``

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Parameter:
    """A parameter an entry point takes: its name, and how it may be passed."""

    name: str
    kind: ParameterKind = ParameterKind.POSITIONAL_OR_KEYWORD
    required: bool = True  # a region's parameters other than device_type have defaults


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
    # its parameters in order: the entry's own, a region's ``positional``, else its role's (an
    # entry bound to a device takes no device_type)
    parameters: tuple[Parameter, ...] = ()

    def bound_to(self, device: str) -> bool:
        """Bound to ``device``, or to none (then it takes the device as an argument)."""
        return self.device in (None, device)


@dataclass(frozen=True)
class ArgumentCheck:
    """What an entry point does with one argument of the wrong kind (``torch.autocast``'s are
    the ``python_surface`` category's; the other entry points' the ``call_forms`` category's)."""

    argument: CheckedArgument
    value: WrongValue
    # unsupported_dtype: as the device's unsupported_dtype rule says (resolved, it may be "accepted")
    outcome: ArgumentOutcome | Literal["accepted"]
    error: str | None
    message: str | None
    source: str
    compiled: UnderCompile | None = None  # the error under torch.compile, where not eager's
    roles: tuple[Role, ...] = (Role.REGION,)  # the roles whose entry points it applies to
    bound: bool | None = None  # only entry points bound to a device (True) or not (False)

    family = "value"  # the call_forms category's name for a validation entry's cases

    @property
    def label(self) -> str:
        return f"{self.argument}={self.value}"

    def selects(self, e: EntryPointInfo) -> bool:
        """Does it apply to ``e`` (its role; bound or not; it takes the argument)?"""
        if e.role not in self.roles or (self.bound is not None and self.bound != (e.device is not None)):
            return False
        return any(p.name == self.argument for p in e.parameters)


# The forms of each family (a region or decorator form applies to the region entry points).
ARGUMENT_FORMS: frozenset[str] = frozenset(get_args(ArgumentForm))
REGION_FORMS: frozenset[str] = frozenset(get_args(RegionForm))


@dataclass(frozen=True)
class CallForm:
    """What one way of using an entry point gives, for the entry points it selects.

    ``canonical``: what the role's canonical use gives (a region: the same work inside ``with
    torch.autocast(device, dtype=...)``; a getter or setter: the same result and state as its
    positional call); ``raises``: ``error`` with ``message`` in its first line, the state left as
    it was; ``body_outside_region``: a decorated body runs with no region. Every form leaves
    the autocast state as it found it.
    """

    form: FormName
    outcome: FormOutcome
    cited: str
    loc: SourceLoc
    roles: tuple[Role, ...] = (Role.REGION,)
    bound: bool | None = None  # only entry points bound to a device (True) or not (False)
    error: str | None = None
    message: str | None = None
    compiled: UnderCompile | None = None  # under torch.compile(fullgraph=True), where not eager's

    @property
    def family(self) -> str:
        """``arguments``, ``region`` or ``decorator``."""
        if self.form in ARGUMENT_FORMS:
            return "arguments"
        return "region" if self.form in REGION_FORMS else "decorator"

    @property
    def label(self) -> str:
        return self.form

    def selects(self, e: EntryPointInfo) -> bool:
        """Does the form apply to ``e`` (its role; bound or not; the parameters it needs)?"""
        if e.role not in self.roles or (self.bound is not None and self.bound != (e.device is not None)):
            return False
        kinds = {p.kind for p in e.parameters}
        if self.form == "keyword":
            return bool(kinds) and ParameterKind.POSITIONAL_ONLY not in kinds
        if self.form == "keyword_for_positional_only":
            return ParameterKind.POSITIONAL_ONLY in kinds
        if self.form == "repeated_argument":
            return bool(e.parameters) and e.parameters[0].kind is ParameterKind.POSITIONAL_OR_KEYWORD
        if self.form == "missing_argument":
            return any(p.required for p in e.parameters)
        if self.form == "swapped_arguments":
            return sum(p.kind is not ParameterKind.KEYWORD_ONLY for p in e.parameters) > 1
        return True


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
    call_forms: tuple[CallForm, ...] = ()

    @property
    def canonical_region(self) -> EntryPointInfo | None:
        """The region entry point the aliases are aliases of (``torch.autocast``)."""
        named = {e.alias_of for e in self.entry_points if e.alias_of}
        return next((e for e in self.entry_points if e.name in named), None)

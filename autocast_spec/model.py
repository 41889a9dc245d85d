"""The typed, immutable spec model.

Everything in the project reads the spec through these classes; only
:mod:`autocast_spec.loader` builds them (from YAML). Instances are frozen
and hold tuples and read-only mappings, so a consumer cannot change the spec
another consumer sees.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from . import vocabulary as vocab
from .catalog import OpInfo
from .common import SourceLoc, Tolerance, frozen_map
from .dtype_rules import LOWER_DTYPES, NoAutocast, UnsupportedDtypeRule
from .higher_order import HigherOrderKernel
from .known_bugs import KnownBug
from .surface import Surface


class Policy(str, enum.Enum):
    """The cast policies of PyTorch's autocast (``autocast_mode.h``)."""

    LOWER_PRECISION_FP = "lower_precision_fp"
    FP32 = "fp32"
    FP32_SET_OPT_DTYPE = "fp32_set_opt_dtype"
    FP32_APPEND_DTYPE = "fp32_append_dtype"
    PROMOTE = "promote"
    LOWER_FIRST_ARG = "lower_first_arg"  # a vendor's (Habana): only the first argument goes lower
    BANNED = "banned"

    def __str__(self) -> str:
        return self.value


POLICY_ORDER: tuple[Policy, ...] = tuple(Policy)


@dataclass(frozen=True)
class OpPolicy:
    """One op's policy on one device, after inheritance and version filtering (an entry's
    YAML ``since``/``until``/``build`` only decide whether it is here, for the release read:
    :class:`autocast_spec.versions.Applicability`)."""

    op: str
    policy: Policy
    loc: SourceLoc
    message: str | None = None  # banned ops: the error the backend must raise
    note: str | None = None
    # the policy under one autocast dtype when it is not ``policy`` (None: passes uncast)
    by_dtype: Mapping[str, Policy | None] = field(default_factory=frozen_map)

    def policy_under(self, dtype: str) -> Policy | None:
        """The policy this op follows under autocast with lower dtype ``dtype`` (None: uncast)."""
        return self.by_dtype.get(dtype, self.policy)

    @property
    def described(self) -> str:
        """``fp32``, or with its dtype exceptions: ``lower_precision_fp (float16: fp32)``."""
        if not self.by_dtype:
            return self.policy.value
        rest = ", ".join(f"{dt}: {p.value if p else 'none'}" for dt, p in sorted(self.by_dtype.items()))
        return f"{self.policy.value} ({rest})"


@dataclass(frozen=True)
class EnvOverride:
    """An environment variable whose file replaces the ops of ``policies`` (see the schema)."""

    variable: str
    policies: tuple[Policy, ...]
    note: str = ""


@dataclass(frozen=True)
class PolicyWrapper:
    """A vendor's kernel template whose leading template arguments are a cast policy per dtype."""

    dtypes: tuple[str, ...]  # the autocast dtype each leading argument applies under, in order
    policies: Mapping[str, Policy | None]  # the vendor's constant -> the policy (None: passes uncast)


@dataclass(frozen=True)
class SourceForms:
    """How the vendor's C++ spells its registrations (``vendor.source_forms``), for ``extract``."""

    source: str
    block_macros: Mapping[str, str] = field(default_factory=frozen_map)  # NAME -> TORCH_LIBRARY_IMPL, ...
    wrappers: Mapping[str, PolicyWrapper] = field(default_factory=frozen_map)


@dataclass(frozen=True)
class VendorRelease:
    """The out-of-tree package release a device file describes (its ``vendor:`` block)."""

    package: str  # the distribution on the registry, e.g. "torch-xla"
    version: str  # its release, e.g. "2.9.0"
    module: str  # what registers the backend when imported, e.g. "torch_xla"
    # variables the backend needs to load offline, set where unset before ``module`` is imported
    # (Google's torch-tpu: TPU_SKIP_MDS_QUERY=1, or its libtpu asks a cloud metadata server)
    environment: Mapping[str, str] = field(default_factory=frozen_map)
    source_forms: SourceForms | None = None
    # what the package needs that pip does not install (the vendor's driver and toolkit), in words
    runtime: str = ""

    @property
    def described(self) -> str:
        return f"{self.package} {self.version}"


@dataclass(frozen=True)
class DeviceSpec:
    device: str
    dispatch_key: str
    torch_versions: str  # a PEP 440 specifier set, e.g. ">=2.13,<2.14"
    default_dtype: str
    supported_dtypes: tuple[str, ...]
    ops: Mapping[str, OpPolicy]
    loc: SourceLoc
    builtin: bool = True  # True: PyTorch itself registers these kernels
    extends: str | None = None
    description: str = ""
    unsupported_dtype: UnsupportedDtypeRule | None = None
    cast_cache: bool = True  # False: weight casts are never cached on this device
    # the dtypes between which casts are made (``lower``: the autocast dtype); empty: any
    cast_only_between: tuple[str, ...] = ()
    env_overrides: tuple[EnvOverride, ...] = ()
    provenance: Mapping[str, Any] = field(default_factory=frozen_map)  # out-of-tree specs: where read
    notes: tuple[str, ...] = ()  # what the load did that the files do not say (env overrides applied)
    # ops registered on the key whose policy a generated spec (probe, extract) could not read: op -> why
    not_observed: Mapping[str, str] = field(default_factory=frozen_map)
    vendor: VendorRelease | None = None  # the vendor release this file describes (out-of-tree)
    known_bugs: tuple[KnownBug, ...] = ()  # the vendor release's own deviations (its file's known_bugs)
    # a vendor's own operators registered at the key, policy not stated (op -> why)
    registered_only: Mapping[str, str] = field(default_factory=frozen_map)
    no_autocast: NoAutocast | None = None  # the backend has no autocast (then no ops, no dtypes)
    higher_order_ops: tuple[HigherOrderKernel, ...] = ()  # Python Autocast kernels of HOPs (own only)

    def __repr__(self) -> str:  # short: tracebacks print it once per frame (pytest's repr_args)
        return f"DeviceSpec({self.device!r}, {len(self.ops)} ops, torch {self.torch_versions})"

    @property
    def lower_dtypes(self) -> tuple[str, ...]:
        """The supported dtypes the suite tests: the lower ones (float32 accepted is no change)."""
        return tuple(d for d in self.supported_dtypes if d in LOWER_DTYPES)

    def policy_of(self, op: str) -> Policy | None:
        entry = self.ops.get(op)
        return entry.policy if entry else None

    def ops_with(self, policy: Policy) -> tuple[str, ...]:
        return tuple(sorted(o for o, e in self.ops.items() if e.policy is policy))

    def policy_table(self) -> dict[str, str]:
        return {op: self.ops[op].policy.value for op in sorted(self.ops)}

    def renamed(self, device: str) -> DeviceSpec:
        """This device's rules under another device name.

        For a PrivateUse1 backend renamed by ``torch.utils.rename_privateuse1_backend``
        (it reads ``spec/privateuse1.yaml`` under its own name), or a reference device
        deciding for the backend: the policy engine only acts for the device it is named.
        """
        return replace(self, device=device)


@dataclass(frozen=True)
class Eligibility:
    floating_only: bool
    never_cast: tuple[str, ...]
    same_device_only: bool


@dataclass(frozen=True)
class CacheRule:
    """The weight-cast cache (``cached_cast`` in autocast_mode.cpp)."""

    source_dtypes: tuple[str, ...]
    leaf_only: bool
    requires_grad_only: bool
    policies: tuple[Policy, ...]
    cleared_at: vocab.ClearedAt
    exclude_views: bool = True  # views are never cached
    key: vocab.CacheKey = "source"
    in_inference_mode: bool = False  # False: no caching or lookup under torch.inference_mode


@dataclass(frozen=True)
class ContextRules:
    thread_local: bool
    new_thread_enabled: bool
    nesting_restores_state: bool
    exception_restores_state: bool
    inference_mode_exit_restores_enabled: bool = True  # set_autocast_enabled inside it is undone


@dataclass(frozen=True)
class CustomOpRules:
    """torch.library.custom_op + register_autocast: the device types it supports."""

    register_autocast_devices: tuple[str, ...] = ()


@dataclass(frozen=True)
class PromoteRule:
    """Promote with a floating input that is neither float32 nor the autocast dtype."""

    foreign_float_action: vocab.ForeignFloatAction
    foreign_float_message: str


@dataclass(frozen=True)
class Rules:
    eligibility: Eligibility
    out_of_place_only: bool
    cache: CacheRule
    context: ContextRules
    default_tolerance: Mapping[str, Tolerance]
    loc: SourceLoc
    promote: PromoteRule = PromoteRule("error", "Unexpected floating ScalarType in at::autocast::prioritize")
    mandatory_core: tuple[str, ...] = ()  # test categories a vendor cannot waive
    unlisted_watchlist: tuple[str, ...] = ()  # ops users expect autocast to change, often wrongly
    custom_ops: CustomOpRules = CustomOpRules()
    known_bugs: tuple[KnownBug, ...] = ()  # for the spec's torch release only


@dataclass(frozen=True)
class Divergence:
    """A declared difference between a compiler/JIT mode and eager autocast for one op."""

    op: str
    dtype: str | None
    observed: str  # what the mode gives: output dtype names ("lower": the autocast dtype), or "error"
    reason: str
    inputs: vocab.InputKind = "float32"
    condition: str | None = None  # what the divergence depends on (the host, a library), in words
    source: str = ""  # its public link, or where it was seen (a mode divergence; a limitation its own)
    backend: str | None = None  # the compile backend (mode compile), the export kind (export); None: all
    loc: SourceLoc | None = None  # where it is declared

    def observed_under(self, dtype: str) -> str:
        """``observed`` for autocast to ``dtype``: each ``lower`` stands for that dtype."""
        return ",".join(dtype if part == "lower" else part for part in self.observed.split(","))


@dataclass(frozen=True)
class ValueDivergence:
    """A declared difference of the output values of one op, or of one region program (several
    ops compiled as one graph, ``conformance/modes/regions.py``), in a compiled mode from eager
    autocast: xfail while the error stays within ``max_error``, a failure beyond it."""

    mode: vocab.CompiledMode
    max_error: float  # the largest absolute error observed: the bound
    reason: str
    host: vocab.Host
    config: vocab.PassConfig
    source: str  # a public link, or "none" (then seen_on names the release)
    loc: SourceLoc
    dtype: str | None = None  # None: every dtype
    inputs: vocab.InputKind | None = None  # None: both
    backend: str | None = None  # the torch.compile backend; None: any
    seen_on: str | None = None
    op: str | None = None  # the op; None: a region's (``region``)
    region: str | None = None  # the region program's id, instead of an op

    def covers(self, mode: str, backend: str, config: str, op: str, dtype: str, inputs: str) -> bool:
        """Does it declare this run of ``op`` (the host aside: :meth:`holds_on`)?"""
        return (
            self.op is not None
            and (self.mode, self.config, self.op) == (mode, config, op)
            and self.backend in (None, backend)
            and self.dtype in (None, dtype)
            and self.inputs in (None, inputs)
        )

    def covers_region(self, backend: str, config: str, region: str, dtype: str) -> bool:
        """Does it declare this run of the region program ``region`` (mode compile)?"""
        return (
            (self.mode, self.config, self.region) == ("compile", config, region)
            and self.backend in (None, backend)
            and self.dtype in (None, dtype)
        )

    def holds_on(self, host: str) -> bool:
        return self.host in ("any", host)

    @property
    def cited(self) -> str:
        return self.source if self.source != "none" else f"no public report; seen on torch {self.seen_on}"


@dataclass(frozen=True)
class JitLimitation:
    id: str
    summary: str
    mode: vocab.JitMode
    expect: vocab.JitOutcome
    torch_versions: str
    source: str
    loc: SourceLoc
    message: str | None = None
    documented: str | None = None  # what the documentation says, when it differs
    differs: tuple[Divergence, ...] = ()
    devices: tuple[str, ...] = ()
    later_calls: str | None = None  # the outcome of calling it again, when other than expect
    observes: tuple[str, ...] = ()  # the ops whose outputs the scenario reports, in output order


@dataclass(frozen=True)
class ModeDivergences:
    """Per execution mode, the op policy results that differ from eager autocast."""

    mode: str
    divergences: tuple[Divergence, ...]


@dataclass(frozen=True)
class Spec:
    """The whole spec for one torch version: devices, rules, op catalog, JIT data."""

    torch_version: str
    devices: Mapping[str, DeviceSpec]
    rules: Rules
    ops: Mapping[str, OpInfo]
    files: tuple[str, ...]
    content_hash: str
    limitations: tuple[JitLimitation, ...] = ()
    mode_divergences: Mapping[str, ModeDivergences] = field(default_factory=frozen_map)
    value_divergences: tuple[ValueDivergence, ...] = ()
    surface: Surface = field(default_factory=Surface)
    installed_torch: str = ""  # the release of the torch it was loaded for (TorchFacts.version)

    def __repr__(self) -> str:  # short: the full repr is megabytes, printed per traceback frame
        return f"Spec(torch {self.torch_version}, devices {sorted(self.devices)}, {len(self.ops)} ops)"

    def device(self, name: str) -> DeviceSpec:
        try:
            return self.devices[name]
        except KeyError:
            known = ", ".join(sorted(self.devices))
            raise KeyError(f"no device {name!r} in the spec (known: {known})") from None

    def op_info(self, op: str) -> OpInfo | None:
        return self.ops.get(op)

    def tolerance(self, op: str, dtype: str) -> Tolerance | None:
        """How far ``op``'s outputs under ``dtype`` autocast may stray from a reference
        computed elsewhere: the op catalog's entry, else the rules' default (None: no
        tolerance is stated for ``dtype``)."""
        info = self.ops.get(op)
        if info is not None and dtype in info.tolerance:
            return info.tolerance[dtype]
        return self.rules.default_tolerance.get(dtype)

    def with_device(self, name: str, device: DeviceSpec) -> Spec:
        """A copy in which device ``name`` follows ``device``'s rules (renamed to ``name``)."""
        devices = {**self.devices, name: device.renamed(name)}
        return replace(self, devices=frozen_map(dict(sorted(devices.items()))))

"""What a conformance run tests: the backend, its dtypes, the spec, and the kind of run
(real tensors, or FakeTensors and no kernels: a policy-only run; native autocast or the
reference standing in for it), and the execution modes the run goes through (``--mode``,
``--compile-backend``: the mode categories generate their cases from them).

:func:`resolve_target` turns the command-line options into a :class:`Target`,
or raises :class:`TargetError` with one line that names the option and the fix
(the plugin turns it into ``pytest.UsageError`` before collection).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from autocast_spec.imports import pairing_note
from autocast_spec.model import DeviceSpec, Spec
from autocast_spec.problems import SpecError
from autocast_spec.versions import VersionChoice
from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.engine.torch_registry import op_exists
from reference_impl.harness.devices import (
    VendorImportError,
    adopt_privateuse1,
    device_is_real,
    fake_device_supported,
    import_vendor,
    tensor_context,
)
from reference_impl.harness.state import raw_autocast
from reference_impl.kernels.reference_autocast import autocast as reference_autocast
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND, Mode
from reference_impl.spectools.installed_spec import load_installed_spec

IMPLEMENTATIONS = ("native", "reference")


class TargetError(Exception):
    """A bad option: the message is one line, naming the option and the fix."""


@dataclass(frozen=True)
class Options:
    backend: str | None
    dtype: str | None
    spec: tuple[str, ...]
    reference_device: str | None
    policy_only: bool
    implementation: str = "native"
    ops: tuple[str, ...] = ()  # --op: only these ops' tests
    modes: tuple[str, ...] = ()  # --mode (repeatable; none: eager)
    compile_backends: tuple[str, ...] = ()  # --compile-backend (repeatable; none: aot_eager)
    programs: int | None = None  # --programs: generated programs per case (None: each case's own)
    programs_shrink: float = 120.0  # --programs-shrink: seconds to shrink a failing program


@dataclass(frozen=True)
class Target:
    """The backend under test and how its tensors are made."""

    spec: Spec
    device: str  # the torch device type, e.g. "cuda" or a privateuse1 backend's name
    device_spec: DeviceSpec
    dtypes: tuple[torch.dtype, ...]  # the lower dtypes under test
    policy_only: bool  # FakeTensors and no kernels: numerics are skipped
    reference_device: str
    # "native": the backend's own autocast (torch.autocast and its Autocast kernels);
    # "reference": reference_impl.autocast stands in for it (self-conformance).
    implementation: str = "native"
    # ops the device spec lists that the installed torch does not have (a torch newer than
    # the spec): left out of device_spec, and reported as skipped "not in this torch"
    absent_ops: tuple[str, ...] = ()
    # --op: the ops whose tests are generated (empty: every op)
    selected_ops: frozenset[str] = frozenset()
    # what the import of the vendor's module did to the environment its spec names (header)
    vendor_note: str = ""
    modes: tuple[Mode, ...] = (Mode.EAGER,)  # the execution modes the run goes through
    # torch.compile's backends under Mode.COMPILE, each a pass of its own
    compile_backends: tuple[str, ...] = (DEFAULT_COMPILE_BACKEND,)
    programs: int | None = None  # generated programs per case, for a campaign (None: each case's own)
    programs_shrink: float = 120.0  # how long a failing generated program may be shrunk (seconds)

    @property
    def compiled_modes(self) -> tuple[Mode, ...]:
        """The selected modes other than eager (what the mode categories compare with eager)."""
        return tuple(m for m in self.modes if m is not Mode.EAGER)

    def __repr__(self) -> str:  # short: tracebacks print it once per frame (pytest's repr_args)
        kind = "policy-only" if self.policy_only else self.implementation
        names = tuple(dtype_name(d) for d in self.dtypes)
        return f"Target({self.device!r}, {names}, {kind}, {self.spec!r})"

    def selects(self, op: str) -> bool:
        """Whether the run generates ``op``'s tests (``--op``)."""
        return not self.selected_ops or op in self.selected_ops

    @property
    def version_note(self) -> str:
        """One line when the spec describes another torch release than the installed one, or a
        vendor's file another release of its package or of torch than those installed."""
        installed = self.spec.installed_torch or self.spec.torch_version
        notes = [VersionChoice(self.spec.torch_version, installed).note(), self._pairing_note(installed)]
        return "; ".join(n for n in notes if n)

    def _pairing_note(self, installed_torch: str) -> str:
        ds = self.device_spec
        if ds.vendor is None or self.uses_reference:
            return ""
        return pairing_note(ds.vendor, ds.loc.file, self.device, ds.torch_versions, installed_torch)

    def absent_reason(self, op: str) -> str:
        return (
            f"not in this torch: {op} is not an operator of torch {self.spec.installed_torch} "
            f"(the spec describes torch {self.spec.torch_version})"
        )

    @property
    def dispatch_key(self) -> str:
        return self.device_spec.dispatch_key

    @property
    def uses_reference(self) -> bool:
        return self.implementation == "reference"

    @property
    def reference_spec(self) -> Spec:
        """The spec the reference reads: the run's, which names the backend's device as the backend."""
        return self.spec

    @property
    def autocast_impl(self) -> Callable[..., Any]:
        """The autocast context manager / decorator under test, called like ``torch.autocast``:
        ``torch.autocast`` natively, ``reference_impl.autocast`` with ``--implementation reference``."""
        if self.uses_reference:
            return functools.partial(reference_autocast, spec=self.reference_spec)
        return torch.autocast

    def tensors(self, device: str | None = None) -> contextlib.AbstractContextManager[None]:
        """Where tensors of ``device`` (default: the backend) are made: FakeTensors in a policy-only
        run."""
        dev = device or self.device
        return tensor_context(dev, fake=self.policy_only or not device_is_real(dev))

    @contextlib.contextmanager
    def autocast(self, dtype: torch.dtype, enabled: bool = True) -> Iterator[None]:
        """The backend's autocast around one op call: ``torch.autocast`` when the device is real.

        In a policy-only run the thread-local state is set directly, since
        ``torch.autocast("cuda")`` disables itself where there is no GPU. With
        ``--implementation reference`` the reference autocast takes its place.
        """
        if self.uses_reference:
            with self.autocast_impl(self.device, dtype=dtype, enabled=enabled):
                yield
        elif self.policy_only:
            with raw_autocast(self.device, dtype, enabled):
                yield
        else:
            with torch.autocast(device_type=self.device, dtype=dtype, enabled=enabled):
                yield

    def describe(self) -> str:
        tensors = "policy-only (FakeTensors)" if self.policy_only else "real tensors"
        impl = "reference_impl.autocast" if self.uses_reference else "native autocast"
        dtypes = ", ".join(map(dtype_name, self.dtypes))
        return (
            f"backend {self.device} ({self.dispatch_key}), {impl}, dtypes {dtypes}, "
            f"{tensors}, "
            f"reference on {self.reference_device}, spec for torch {self.spec.torch_version} "
            f"({len(self.spec.files)} files, {self.spec.content_hash[:12]})"
            + (f"; {self.vendor_note}" if self.vendor_note else "")
        )


def _spec_for_backend(spec: Spec, backend: str) -> Spec:
    """``spec`` as it describes ``backend``: a PrivateUse1 backend renamed by
    ``torch.utils.rename_privateuse1_backend`` with no device file of its own reads
    ``privateuse1``'s, under its own name (the policy engine acts for the device it is named)."""
    if backend in spec.devices:
        return spec
    pu1 = torch._C._get_privateuse1_backend_name()
    if backend == pu1 and "privateuse1" in spec.devices:
        return spec.with_device(backend, spec.devices["privateuse1"])
    known = ", ".join(sorted(spec.devices))
    raise TargetError(
        f"--backend {backend}: the spec has no device {backend!r} (known: {known}); "
        f"pass --spec with a device file for it (see spec/privateuse1.yaml)"
    )


def load_backend(ds: DeviceSpec, backend: str) -> str:
    """Import the package a vendor's device file names (``vendor.module``), so its device and
    kernels are registered before the suite looks for them, with the variables of its
    ``vendor.environment`` set where unset; a PrivateUse1 backend that did not name its device
    (Google's torch-tpu without a TPU) is named as the spec names it. Returns a note for the
    header on that environment (empty where the spec names none)."""
    if ds.vendor is None:
        return ""
    try:
        done = import_vendor(ds.vendor)
    except VendorImportError as e:
        raise TargetError(
            f"--spec {ds.loc.file}: it describes {ds.vendor.described}, whose module "
            f"{ds.vendor.module!r} does not import: {e.why}"
        ) from None
    if ds.dispatch_key == "AutocastPrivateUse1" and backend == ds.device:
        adopt_privateuse1(backend)
    return done.note()


def _fake_index(ds: DeviceSpec) -> str:
    """Where a policy-only run makes FakeTensors of ``ds``: on the device as named, or on its
    index 0 for a backend without autocast (FakeTensor asks the device module for the current
    index otherwise, which torch-rbln 0.12.0 answers only where a device is found; that run's
    checks make their tensors there: categories/no_autocast.py)."""
    return f"{ds.device}:0" if ds.no_autocast is not None else ds.device


def _dtypes_for(ds: DeviceSpec, dtype: str | None) -> tuple[str, ...]:
    """The lower dtypes under test: none for a backend without autocast (its own cases)."""
    if ds.no_autocast is not None:
        if dtype not in (None, "all"):
            raise TargetError(
                f"--dtype {dtype}: the {ds.device} spec states no autocast ({ds.no_autocast.loc}): "
                "no dtype to test; leave out --dtype"
            )
        return ()
    if dtype is None:
        return (ds.default_dtype,)
    if dtype == "all":
        return ds.lower_dtypes
    if dtype not in ds.lower_dtypes:
        return_hint = ", ".join(ds.lower_dtypes)
        raise TargetError(
            f"--dtype {dtype}: the {ds.device} spec does not support it as a lower dtype; use one of "
            f"{return_hint} or 'all'"
        )
    return (dtype,)


def _load(paths: tuple[str, ...], categories: Collection[str] | None = None) -> Spec:
    for p in paths:
        if not Path(p).exists():
            raise TargetError(f"--spec {p}: no such file or directory")
    try:
        return load_installed_spec([Path(p) for p in paths] or None, nearest=True, categories=categories)
    except SpecError as e:
        first = e.problems[0] if e.problems else None
        more = (
            f" (and {len(e.problems) - 1} more; run 'autocast-spec validate')" if len(e.problems) > 1 else ""
        )
        raise TargetError(f"--spec: {first}{more}") from None
    except (OSError, ValueError) as e:  # unreadable files, a broken schema
        where = ", ".join(paths) or "the bundled spec"
        raise TargetError(f"--spec: cannot load {where}: {type(e).__name__}: {e}") from None


def resolve_target(opts: Options, categories: Collection[str] | None = None) -> Target:
    """Validate the options against the spec and the machine.

    ``categories``: the test categories ``mandatory_core`` may name (the registry's)."""
    backend = opts.backend or "cpu"
    if opts.implementation not in IMPLEMENTATIONS:
        raise TargetError(f"--implementation {opts.implementation}: use one of {', '.join(IMPLEMENTATIONS)}")
    loaded = _load(opts.spec, categories)
    vendor_note = ""
    if backend in loaded.devices and opts.implementation == "native":  # the reference needs no package
        vendor_note = load_backend(loaded.devices[backend], backend)
    spec = _spec_for_backend(loaded, backend)
    ds = spec.devices[backend]
    dtypes = tuple(dtype_of(d) for d in _dtypes_for(ds, opts.dtype))
    # a policy-only run never asks the device anything (not even for an empty tensor)
    if not opts.policy_only and not device_is_real(backend):
        raise TargetError(
            f"--backend {backend}: no {backend} device is available on this machine; "
            f"add --policy-only to check its policy with FakeTensors, or run where the device is"
        )
    if opts.policy_only:
        reason = fake_device_supported(backend, _fake_index(ds))
        if reason:
            raise TargetError(f"--backend {backend} --policy-only: {reason}")
    ref = opts.reference_device or ("cpu" if opts.policy_only else backend)
    if ref != backend and not device_is_real(ref):
        raise TargetError(f"--reference-device {ref}: no {ref} device on this machine; use cpu")
    absent = tuple(sorted(op for op in ds.ops if not op_exists(op)))
    if absent:
        ds = replace(ds, ops={op: e for op, e in ds.ops.items() if op not in absent})
    selected = _selected_ops(opts.ops, spec, ds)
    modes = tuple(dict.fromkeys(Mode(m) for m in opts.modes)) or (Mode.EAGER,)
    return Target(
        spec,
        backend,
        ds,
        dtypes,
        opts.policy_only,
        ref,
        opts.implementation,
        absent,
        selected,
        vendor_note,
        modes,
        tuple(dict.fromkeys(opts.compile_backends)) or (DEFAULT_COMPILE_BACKEND,),
        opts.programs,
        opts.programs_shrink,
    )


def _selected_ops(ops: tuple[str, ...], spec: Spec, ds: DeviceSpec) -> frozenset[str]:
    """``--op`` names: each must be an operator of the installed torch."""
    for op in ops:
        if not op_exists(op):
            known = sorted(set(ds.ops) | set(spec.ops))
            close = difflib.get_close_matches(op, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else " (give the aten name, e.g. aten::mm)"
            raise TargetError(f"--op {op}: not an operator of this torch{hint}")
    return frozenset(ops)

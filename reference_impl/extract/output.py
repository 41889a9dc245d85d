"""An extracted device as a spec: a :class:`DeviceSpec` for ``diff``, a file for ``validate``.

C++ registrations say which op gets which policy; they do not say the device's
default dtype, its supported dtypes or what an unsupported one does. Those are
taken from the bundled spec (the device itself, or ``--dtypes-from D``; a
PrivateUse1 backend from the ``privateuse1`` template) and the file's header says so,
as ``probe`` does for what it cannot observe.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from autocast_spec.common import SourceLoc, frozen_map
from autocast_spec.files import device_torch_ranges, vendor_spec_dir
from autocast_spec.model import DeviceSpec, OpPolicy
from autocast_spec.problems import SpecError
from autocast_spec.versions import nearest_covered_version, specifier_contains
from autocast_spec.yaml_source import read_yaml

from ..engine.torch_registry import build_features, parse_release
from ..probe.device_spec import version_range
from ..probe.render import ObservedPolicy, device_data, device_yaml
from ..spectools.installed_spec import load_installed_spec
from .build import PRIVATEUSE1_KEY, Extracted
from .scan import ExtractError, Scan


@dataclass
class ExtractedSpec:
    """The device spec, and what its header and stderr say about where each fact came from."""

    spec: DeviceSpec
    extracted: Extracted
    notes: list[str] = field(default_factory=list)  # "# NOTE"-style header lines
    warnings: list[str] = field(default_factory=list)  # stderr lines


def _bundled(device: str, version: str) -> tuple[DeviceSpec | None, str]:
    """The bundled spec's ``device`` for ``version`` (else the nearest covered release), and its name.

    A device PyTorch does not register (``xla``, ``npu``, ``hpu``, ``tpu``) is taken from the
    bundled vendor spec (``spec/vendors/``) that states it.
    """
    try:
        spec = load_installed_spec(torch_version=version, check_registry=False)
        read_for = version
    except SpecError:
        near = nearest_covered_version(device_torch_ranges(), version)
        if near is None:
            return None, ""
        spec = load_installed_spec(torch_version=near, check_registry=False)
        read_for = near
    same = parse_release(read_for)[:2] == parse_release(version)[:2]
    label = f"the bundled spec for torch {read_for}" + ("" if same else f" (none covers torch {version})")
    if device in spec.devices:
        return spec.devices[device], label
    return _vendor(device, read_for)


def _vendor(device: str, version: str) -> tuple[DeviceSpec | None, str]:
    """``device`` as the bundled vendor spec that states it gives it, for ``version``: a file that
    describes that release first (torch_npu_2.14.yaml before torch_npu.yaml for 2.14)."""
    files = sorted(vendor_spec_dir().glob("*.yaml"))
    covers = [f for f in files if any(specifier_contains(r, version) for r in device_torch_ranges([f]))]
    for f in covers + [f for f in files if f not in covers]:
        data = read_yaml(f, str(f)).data
        if not isinstance(data, dict) or data.get("device") != device:
            continue
        # a vendor file describes one release of the vendor, paired with its own torch releases
        read_for = nearest_covered_version(device_torch_ranges([f]), version)
        if read_for is None:
            continue
        try:
            spec = load_installed_spec([f], torch_version=read_for, check_registry=False)
        except SpecError:
            continue  # the vendor spec and the bundled one share no release
        if device in spec.devices:
            name = f"{f.parent.name}/{f.name}"
            return spec.devices[device], f"the bundled vendor spec {name} (torch {read_for})"
    return None, ""


def _dtype_source(ex: Extracted, dtypes_from: str | None) -> str:
    if dtypes_from:
        return dtypes_from
    return "privateuse1" if ex.key == PRIVATEUSE1_KEY and ex.device == "privateuse1" else ex.device


def _donor(
    ex: Extracted, source: str, version: str, dtypes_from: str | None
) -> tuple[DeviceSpec | None, str, str]:
    """(the spec the dtypes come from, its label, the device named): a PrivateUse1 backend named by
    ``--device`` that no bundled spec states takes the ``privateuse1`` template."""
    donor, label = _bundled(source, version)
    if donor is None and not dtypes_from and ex.key == PRIVATEUSE1_KEY and source != "privateuse1":
        source = "privateuse1"
        donor, label = _bundled(source, version)
    return donor, label, source


def to_spec(
    s: Scan,
    ex: Extracted,
    torch_version: str,
    dtypes_from: str | None = None,
    dtypes_of: tuple[DeviceSpec, str] | None = None,
) -> ExtractedSpec:
    """``ex`` as a flat device spec for ``torch_version`` (``X.Y`` or ``X.Y.Z``); ``dtypes_of``: the
    device (and its file) whose dtype defaults it takes, else a bundled one (``dtypes_from``)."""
    donor: DeviceSpec | None
    if dtypes_of is not None:
        donor, label, source = dtypes_of[0], dtypes_of[1], dtypes_of[0].device
    else:
        donor, label, source = _donor(ex, _dtype_source(ex, dtypes_from), torch_version, dtypes_from)
    if donor is None:
        raise ExtractError(
            [
                f"{ex.device}: the sources do not state its default and supported dtypes, and the bundled "
                f"spec has no device {source!r} to take them from: pass --dtypes-from DEVICE (e.g. cuda)"
            ]
        )
    out = ExtractedSpec(_device_spec(ex, donor, source, torch_version), ex)
    if not specifier_contains(donor.torch_versions, ".".join(map(str, parse_release(torch_version)))):
        out.warnings.append(
            f"note: the dtype defaults and rules are taken from {label}, which describes torch "
            f"{donor.torch_versions}, not torch {torch_version}: check them against that release"
        )
    sources = ", ".join(str(p) for p in s.sources)
    out.notes.append(f"Generated by 'autocast-spec extract' from {sources}.")
    for h in s.headers:
        own = " (the installed torch's; the source tree holds none)" if h == s.torch_header else ""
        out.notes.append(f"AT_FORALL_* op lists and KERNEL macros read from {h}{own}.")
    out.notes.append(
        f"NOT EXTRACTED: dtype defaults and rules (C++ registrations do not state them): taken from "
        f"{source} in {label}."
    )
    if not ex.has_fallback:
        out.notes.append(
            f"NOTE: no fallthrough fallback (TORCH_LIBRARY_IMPL(_, {ex.key}, m)) in the files read."
        )
    for op in ex.fallthrough_ops:
        out.notes.append(
            f"NOTE: {op} is registered as a fallthrough on {ex.key}: not autocast, so not listed."
        )
    for c in ex.undecided:
        n = sum(c in e.conds for e in ex.entries.values())
        how = f"'build: {c.build}'" if c.build else "a note"
        cond = f"#if {c.text}" if not c.negated else f"the #else of #if {c.text}"
        out.notes.append(f"UNDECIDED: {cond} at {c.file}:{c.line}: {n} op(s) under it carry {how}")
        out.warnings.append(
            f"warning: {c.file}:{c.line}: {cond} cannot be decided from the sources; {n} op(s) under it "
            f"carry {how} in the spec (decide it with -D)"
        )
    for sp in s.spliced:
        what = (
            f"'{_short(sp.text)}' is part of the '//' comment on line {sp.comment_line}, which ends in a "
            "backslash (C++ joins the lines before it removes comments): not compiled"
        )
        out.notes.append(f"SPLICED: {sp.file}:{sp.line}: {what}.")
        out.warnings.append(f"note: {sp.where}: {what}, so not read")
    for op, why in ex.unresolved.items():
        out.notes.append(f"NO POLICY (under not_observed): {op}: {why}")
        out.warnings.append(f"warning: no policy for {op}: {why} (listed under not_observed)")
    return out


def with_dtypes_of(x: ExtractedSpec, d: DeviceSpec, label: str) -> ExtractedSpec:
    """``x`` with the dtype defaults of ``d`` (C++ registrations do not state them), from ``label``."""
    spec = dataclasses.replace(
        x.spec,
        default_dtype=d.default_dtype,
        supported_dtypes=d.supported_dtypes,
        unsupported_dtype=d.unsupported_dtype,
    )
    notes = [
        f"NOT EXTRACTED: dtype defaults and rules (C++ registrations do not state them): taken from {label}."
        if n.startswith("NOT EXTRACTED")
        else n
        for n in x.notes
    ]
    return dataclasses.replace(x, spec=spec, notes=notes)


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _device_spec(ex: Extracted, donor: DeviceSpec, source: str, torch_version: str) -> DeviceSpec:
    loc = SourceLoc(f"extract:{ex.device}", 0)
    features = build_features()
    ops = {
        op: OpPolicy(op, e.policy, loc, message=e.message, note=e.note, by_dtype=frozen_map(dict(e.by_dtype)))
        for op, e in sorted(ex.entries.items())
        if e.build is None or e.build in features  # as the loader reads `build:` entries
    }
    return DeviceSpec(
        device=ex.device,
        dispatch_key=ex.key,
        torch_versions=version_range(torch_version),
        default_dtype=donor.default_dtype,
        supported_dtypes=donor.supported_dtypes,
        ops=frozen_map(ops),
        loc=loc,
        builtin=donor.builtin if source == ex.device else False,
        description=f"{ex.device} autocast ({ex.key}), as extracted from C++ source.",
        unsupported_dtype=donor.unsupported_dtype,
        not_observed=frozen_map(dict(sorted(ex.unresolved.items()))),
    )


def _observed(out: ExtractedSpec) -> dict[str, ObservedPolicy]:
    entries = out.extracted.entries
    return {
        op: ObservedPolicy(e.policy, e.message, e.note, e.build, dict(e.by_dtype))
        for op, e in entries.items()
    }


def to_yaml(out: ExtractedSpec) -> str:
    return device_yaml(out.spec, _observed(out), "\n".join(out.notes))


def to_data(out: ExtractedSpec) -> dict[str, object]:
    """The same content as :func:`to_yaml`, as plain data (``--format json``)."""
    return device_data(out.spec, _observed(out))


def to_json(out: ExtractedSpec) -> str:
    return json.dumps(to_data(out), indent=2)


def write(text: str, path: Path) -> None:
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")

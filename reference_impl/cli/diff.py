"""``autocast-spec diff A B``: how autocast differs between two devices, spec trees or torch versions.

Each side is one of:

- a bundled device name: ``cuda``;
- a spec file or directory: ``my-npu.yaml``, ``spec/`` (a file holding one device
  compares that device; a directory compares every device, paired by name);
- ``probe:D``: the installed torch's live autocast on device D (where the other side is a
  vendor's device file for D, the module it names is imported first, as the suite does);
- ``extract:PATH``: what the C++ source at PATH (a file or a tree) registers, as
  ``autocast-spec extract`` reads it: every device it registers, paired by name;

and a spec side may carry ``@X.Y`` to read it for another torch version
(``cuda@2.12``, ``spec@2.11``); ``--torch-version`` sets that for both sides.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

from autocast_spec.common import frozen_map
from autocast_spec.model import DeviceSpec, Spec
from autocast_spec.problems import SpecError, SpecProblem
from autocast_spec.versions import nearest_covered_version
from autocast_spec.yaml_source import read_yaml

from ..engine.torch_registry import installed_torch_version
from ..extract.api import ExtractedSpec, ExtractError, extract
from ..extract.forms import IN_TREE_DEVICES
from ..extract.output import with_dtypes_of
from ..harness.devices import VendorImportError, adopt_privateuse1, import_vendor
from ..probe.bundled import probe_with_bundled
from ..probe.device_spec import ProbeError
from ..spectools.installed_spec import load_installed_spec
from ..spectools.specdiff import PairingError, Side, SpecDiff, diff_sides
from ..spectools.specdiff_render import to_json, to_markdown
from .common import EXIT_DIFF, EXIT_OK, UsageError, add_import_option, import_modules, write_out

_VERSION_SUFFIX = re.compile(r"^(?P<base>.+)@(?P<version>\d+\.\d+(\.\d+)?)$")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "diff",
        help="compare two devices, spec trees, torch versions, or a spec with a live backend",
        description="Compare A with B. Each is a bundled device name (cuda), a spec file or "
        "directory, probe:D for the installed torch's live autocast on device D, or extract:PATH for "
        "the autocast registrations in C++ source (a file or a tree); a spec side "
        "may end in @X.Y to read it for that torch version (cuda@2.12). Lists ops added, "
        "removed and moved between policies, and changes of dtype defaults, supported dtypes, "
        "rules, tolerances and JIT limitation outcomes.",
    )
    p.add_argument("a", metavar="A", help="the old side")
    p.add_argument("b", metavar="B", help="the new side")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when there are differences, 0 when there are none (like git diff --exit-code)",
    )
    p.add_argument("--torch-version", metavar="X.Y", help="read both spec sides for this torch version")
    add_import_option(
        p,
        "import MODULE before a probe:D side is probed: the package that registers an "
        "out-of-tree backend (a vendor device file on the other side names its own module, "
        "imported without this); repeatable",
    )
    p.set_defaults(run=run)


def _one_line(e: SpecError, what: str) -> str:
    """The first problem (it names file and line), with a count of the rest."""
    first = str(e.problems[0]) if e.problems else f"{what}: invalid spec"
    more = len(e.problems) - 1
    tail = f" (+{more} more; run 'autocast-spec validate' on {what})" if more > 0 else ""
    return f"{first}{tail}"


def _load(paths: list[Path] | None, version: str, what: str) -> Spec:
    try:
        # op names are checked against the registry only for the installed release (the loader's rule)
        return load_installed_spec(paths, torch_version=version)
    except SpecError as e:
        raise UsageError(_one_line(e, what)) from None


def _device_file(path: Path) -> tuple[str, str] | None:
    """(device, torch range) of a single device spec file; None for other files."""
    try:
        data = read_yaml(path, str(path)).data
    except SpecProblem:
        return None
    if isinstance(data, dict) and data.get("kind") == "device":
        return str(data.get("device")), str(data.get("torch", ""))
    return None


def import_for_probe(device: str, other: Side) -> None:
    """Before probing ``device``: import the module the other side's vendor file for it names
    (``vendor.module``, with its ``vendor.environment``), as the suite does; without it the
    probe would see only what torch itself registers. A module that does not import is a usage
    error naming it."""
    ds = other.devices.get(device)
    vendor = ds.vendor if ds is not None else None
    if ds is None or vendor is None:
        return
    try:
        import_vendor(vendor)
    except VendorImportError as e:
        raise UsageError(
            f"probe:{device}: {other.label} describes {vendor.described}, whose module "
            f"{vendor.module!r} must be imported to probe {device}, and it does not import here: {e.why}"
        ) from None
    if ds.dispatch_key == "AutocastPrivateUse1":
        adopt_privateuse1(device)


def probe_side(device: str, every_dtype: bool = False) -> Side:
    """The live probe of ``device``, filled as ``probe`` fills it; what it could not observe is carried.
    ``every_dtype``: observe each op under every supported dtype (the other side states policies by dtype)."""
    try:
        probed = probe_with_bundled(device, every_dtype=every_dtype)
    except ProbeError as e:
        raise UsageError(f"probe:{device}: {e}") from None
    label = f"probe:{device} (torch {probed.torch_version})"
    return Side(
        label,
        {device: probed.spec},
        None,
        single=True,
        unobserved={device: dict(probed.unresolved)},
        notes=tuple(probed.borrowed),
    )


_SIDE_NOTES = ("NOT EXTRACTED", "UNDECIDED", "SPLICED")


def extract_side(
    path: str, torch_version: str | None, want: str | None = None, donor: Side | None = None
) -> Side:
    """What the C++ source at ``path`` registers; ops whose policy it cannot read are carried apart.

    ``want``: the device the other side names. When the source registers it (a PrivateUse1
    block counts for a backend name that is not one of torch's own devices, as with
    ``extract --device``), the side is that device alone. Otherwise the side holds every device
    the source registers and says that this is all of them (``registers``): the device asked
    for is then reported with all its ops removed, never compared with another device.
    ``donor``: the other side, a spec naming ``want``: the dtype defaults, which C++
    registrations do not state, are taken from it, so that no difference is reported that
    only the choice of a bundled spec to borrow them from made; a vendor file's
    ``vendor.source_forms`` say how the vendor's C++ spells its registrations.
    """
    if not path:
        raise UsageError("'extract:': name the source, e.g. extract:aten/src/ATen/autocast_mode.cpp")
    version = torch_version or installed_torch_version()
    vendor = donor.device.vendor if donor is not None and donor.single else None
    forms = vendor.source_forms if vendor is not None else None
    try:
        found = {x.spec.device: x for x in extract([Path(path)], version, every_device=True, forms=forms)}
        if want and want not in found and "privateuse1" in found and want not in IN_TREE_DEVICES:
            found.pop("privateuse1")
            (found[want],) = extract([Path(path)], version, device=want, forms=forms)
    except ExtractError as e:
        raise UsageError(*(f"extract:{path}: {line}" for line in e.lines)) from None
    specs = [found[want]] if want in found else list(found.values())
    if want in found and donor is not None and donor.spec is not None:
        specs = [with_dtypes_of(found[want], donor.device, f"{donor.label}, the side it is compared with")]
        if vendor is not None:
            specs = [_over_torch(specs[0], donor.device, donor.spec.torch_version)]
    notes = [n.rstrip(".") for x in specs for n in x.notes if n.startswith(_SIDE_NOTES)]
    if want and want not in found:  # the notes on the devices it does register do not matter here
        notes = [n for n in notes if n.startswith("SPLICED")]
        notes.insert(0, f"NOT REGISTERED: no Autocast block for {want} (it registers: {', '.join(found)})")
    side = Side(
        f"extract:{path}",
        {x.spec.device: x.spec for x in specs},
        None,
        single=want in found,
        unobserved={x.spec.device: dict(x.extracted.unresolved) for x in specs},
        notes=tuple(dict.fromkeys(notes)),
        registers=True,
    )
    if want in found and donor is not None and donor.spec is not None:
        return with_unobservable_from(side, want, donor.device, donor.label)
    return side


def _over_torch(x: ExtractedSpec, vendor_device: DeviceSpec, version: str) -> ExtractedSpec:
    """A vendor's kernels for one of torch's own devices (IPEX on cpu) replace torch's for the ops
    they register (a fallthrough too); the others keep torch's: ``x`` laid over the bundled device
    for ``version``, the release the vendor file was read for, so that the comparison is of the
    whole Autocast table. Where the bundled spec does not cover that release, or torch has no
    Autocast kernels for the device (xla), the vendor's kernels are compared alone."""
    try:
        base = _load(None, version, f"bundled spec for torch {version}").devices.get(vendor_device.device)
    except UsageError:
        note = f"NOT EXTRACTED: the bundled spec does not cover torch {version}: the vendor's kernels alone"
        return dataclasses.replace(x, notes=[*x.notes, note])
    if base is None:
        return x
    own = {*x.spec.ops, *x.spec.not_observed, *x.extracted.fallthrough_ops}  # what the build registers
    ops = {**{op: e for op, e in base.ops.items() if op not in own}, **x.spec.ops}
    spec = dataclasses.replace(x.spec, ops=frozen_map(dict(sorted(ops.items()))))
    kept = len(ops) - len(x.spec.ops)
    note = (
        f"NOT EXTRACTED: {kept} ops the sources do not register keep torch {version}'s {base.device} "
        "kernels (the bundled spec): the vendor's kernels replace torch's only for the ops they name"
    )
    return dataclasses.replace(x, spec=spec, notes=[*x.notes, note])


def _probed_device(text: str) -> str | None:
    if not text.startswith("probe:"):
        return None
    device = text.removeprefix("probe:")
    if not device:
        raise UsageError(f"{text!r}: name the device to probe, e.g. probe:cuda")
    return device


def resolve_side(text: str, torch_version: str | None) -> Side:
    """``cuda``, ``cuda@2.12``, ``spec/``, ``file.yaml@2.12``, ``probe:D``, ``extract:PATH`` -> a Side."""
    if text.startswith("extract:"):
        return extract_side(text.removeprefix("extract:"), torch_version)
    device = _probed_device(text)
    if device is not None:
        return probe_side(device)
    m = _VERSION_SUFFIX.match(text)
    base = m.group("base") if m else text
    asked = (m.group("version") if m else None) or torch_version
    version = asked or installed_torch_version()
    label = text if m or not torch_version else f"{text}@{torch_version}"
    path = Path(base)
    if path.exists():
        device_file = _device_file(path) if path.is_file() else None
        if device_file is not None and asked is None:
            # a single device file is read for a torch version it describes
            version = nearest_covered_version([device_file[1]], version) or version
        spec = _load([path], version, base)
        if device_file is None:
            return Side(label, dict(spec.devices), spec, single=False)
        named, covers = device_file
        if named not in spec.devices:
            raise UsageError(f"{base}: describes {named} for torch {covers}, not for torch {version}")
        return Side(label, {named: spec.devices[named]}, spec, single=True)
    if "/" in base or base.endswith((".yaml", ".yml", ".json")):
        raise UsageError(f"{base}: no such file or directory")
    spec = _load(None, version, f"bundled spec for torch {version}")
    if base not in spec.devices:
        raise UsageError(
            f"{base!r} is not a bundled device ({', '.join(sorted(spec.devices))}), a spec file or "
            "directory, or probe:DEVICE"
        )
    return Side(label, {base: spec.devices[base]}, spec, single=True)


def _probe_beside(device: str, other: Side) -> Side:
    """probe:D compared with ``other``: its vendor's module imported first, and every dtype
    observed where ``other`` states a policy by dtype (else those would read as moved)."""
    import_for_probe(device, other)
    ds = other.devices.get(device)
    side = probe_side(device, every_dtype=ds is not None and any(e.by_dtype for e in ds.ops.values()))
    return side if ds is None else with_unobservable_from(side, device, ds, other.label)


def with_unobservable_from(side: Side, device: str, ds: DeviceSpec, label: str) -> Side:
    """The probe side with the facts a probe cannot observe (a kernel's ``cast_only_between``
    and ``env_overrides``, read from its sources) taken from the other side, so that they are
    not compared; the side's notes say so."""
    probed = side.device
    fields = {
        name: getattr(ds, name)
        for name in ("cast_only_between", "env_overrides")
        if getattr(ds, name) and getattr(ds, name) != getattr(probed, name)
    }
    if not fields:
        return side
    note = f"{' and '.join(fields)}: read from the kernels' sources, not observed; taken from {label}"
    return dataclasses.replace(
        side, devices={device: dataclasses.replace(probed, **fields)}, notes=(*side.notes, note)
    )


def compute(a: str, b: str, torch_version: str | None = None) -> SpecDiff:
    # a spec side first; a probed side beside it (the spec may name the module that registers
    # the device); an extract side last, paired with the device the other side names
    texts = {"a": a, "b": b}
    other_of = {"a": "b", "b": "a"}
    sides: dict[str, Side] = {
        k: resolve_side(t, torch_version)
        for k, t in texts.items()
        if not t.startswith("extract:") and _probed_device(t) is None
    }
    for k, t in texts.items():
        device = _probed_device(t)
        if device is not None:
            beside = sides.get(other_of[k])
            sides[k] = _probe_beside(device, beside) if beside is not None else resolve_side(t, torch_version)
    for k, t in texts.items():
        if k not in sides:
            other = sides.get(other_of[k])
            want = other.device.device if other is not None and other.single else None
            sides[k] = extract_side(t.removeprefix("extract:"), torch_version, want, other)
    side_a, side_b = sides["a"], sides["b"]
    try:
        return diff_sides(side_a, side_b)
    except PairingError as e:
        raise UsageError(str(e)) from None


def run(args: argparse.Namespace) -> int:
    import_modules(args.imports)
    d = compute(args.a, args.b, args.torch_version)
    write_out(to_json(d) if args.format == "json" else to_markdown(d))
    return EXIT_DIFF if args.exit_code and not d.identical else EXIT_OK

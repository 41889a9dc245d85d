"""YAML spec files -> one typed, immutable :class:`~autocast_spec.model.Spec`.

Steps: gather the files and check each against the JSON Schema (:mod:`.files`),
pick the release to describe and each device's file for it (:mod:`.versions`),
build the devices (:mod:`.devices`) and the shared pieces (:mod:`.builders`), and
run the semantic checks (:mod:`.checks`). Every problem found is collected and
raised together as one :class:`SpecError`, each with its file and line.

What the loader knows of torch is what the caller tells it (:class:`TorchFacts`):
``reference_impl`` passes the installed torch's; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from . import checks
from .builders import build_jit, build_ops, build_rules, build_surface, build_value_divergences
from .catalog import OpInfo
from .common import frozen_map
from .devices import RawDevice, raw_device, resolve_devices
from .files import Sources, content_hash, gather
from .model import DeviceSpec, Divergence, JitLimitation, ModeDivergences, Spec, Surface, ValueDivergence
from .problems import SpecError, SpecProblem
from .versions import (
    Applicability,
    TorchFacts,
    device_files_for,
    release_to_read,
    same_release,
    specifier_contains,
)
from .yaml_source import YamlDocument


@dataclass
class _ByKind:
    devices: dict[str, list[YamlDocument]] = field(default_factory=dict)
    rules: list[YamlDocument] = field(default_factory=list)
    ops: list[YamlDocument] = field(default_factory=list)
    jit: list[YamlDocument] = field(default_factory=list)
    surface: list[YamlDocument] = field(default_factory=list)

    @classmethod
    def of(cls, docs: Sequence[YamlDocument]) -> _ByKind:
        out = cls()
        for d in docs:
            kind = d.data["kind"]
            if kind == "device":
                out.devices.setdefault(d.data["device"], []).append(d)
            else:
                getattr(out, kind).append(d)
        return out


def load_spec(
    paths: Sequence[Path] | None = None,
    *,
    installed: TorchFacts,
    torch_version: str | None = None,
    check_registry: bool = True,
    nearest: bool = False,
    categories: Collection[str] | None = None,
) -> Spec:
    """Load and check a spec.

    ``paths``: spec files or directories; None means the bundled spec. User files
    that hold no ``rules`` file are overlaid on the bundled spec: a vendor's device
    file can ``extends: cuda`` without copying anything. A device defined in the
    user's files replaces the bundled one of the same name.

    ``installed``: the torch the spec is read for: its release (the default of
    ``torch_version``; :attr:`Spec.installed_torch`), the build features ``build:``
    conditions are judged by, and its operator names. ``torch_version``: the release
    to describe instead. With ``nearest`` and no ``torch_version``, a torch that no
    device file covers is read as the nearest covered release.
    ``check_registry``: check op names against ``installed.op_names`` (when known,
    and only when describing the installed release).
    ``categories``: the test categories that may be mandatory (the suite's registry);
    a ``mandatory_core`` name outside them is a problem at its line.
    """
    sources = gather(paths)
    kinds = _ByKind.of(sources.docs)
    ranges, own = _ranges_to_read(sources, kinds)
    # the caller's own device files never vanish: a release they do not cover reads their nearest
    version = release_to_read(ranges, installed.version, torch_version, nearest or own)
    app = Applicability(version, installed.build)

    where = sources.files[0].parent.as_posix() if sources.files else "spec"
    chosen, probs = device_files_for(kinds.devices, version, where)
    raw: dict[str, RawDevice] = {name: raw_device(doc, app, probs) for name, doc in chosen.items()}
    devices = resolve_devices(raw, probs)

    if len(kinds.rules) != 1:
        probs.append(
            SpecProblem(
                kinds.rules[1].file if len(kinds.rules) > 1 else "spec",
                0,
                "a spec needs exactly one 'kind: rules' file"
                + (f" (found {len(kinds.rules)})" if kinds.rules else " (found none)"),
            )
        )
    rules = build_rules(kinds.rules[0], version) if kinds.rules else None

    ops: dict[str, OpInfo] = {}
    for d in kinds.ops:
        for op, info in build_ops(d, app).items():
            if op in ops:
                probs.append(SpecProblem(d.file, info.loc.line, f"{op} already has samples at {ops[op].loc}"))
                continue
            ops[op] = info

    limitations: list[JitLimitation] = []
    divs: dict[str, list[Divergence]] = {}
    values: list[ValueDivergence] = []
    for d in kinds.jit:
        values.extend(build_value_divergences(d, app))
        lims, dv = build_jit(d, app)
        limitations.extend(lims)
        for m, xs in dv.items():
            divs.setdefault(m, []).extend(xs)

    names = installed.op_names
    if check_registry and names is not None and same_release(version, installed.version):
        probs.extend(_registry_problems(names, sources, kinds, devices, ops, version))
    probs.extend(checks.limitation_problems(limitations))
    if categories is not None and kinds.rules:
        probs.extend(checks.mandatory_core_problems(kinds.rules[0], categories))
    if probs or rules is None:
        raise SpecError(probs)

    return Spec(
        torch_version=version,
        installed_torch=installed.version,
        devices=frozen_map(dict(sorted(devices.items()))),
        rules=rules,
        ops=frozen_map(dict(sorted(ops.items()))),
        files=tuple(d.file for d in sources.docs),
        content_hash=content_hash(sources.files),
        limitations=tuple(limitations),
        mode_divergences=frozen_map({m: ModeDivergences(m, tuple(xs)) for m, xs in sorted(divs.items())}),
        value_divergences=tuple(values),
        surface=build_surface(kinds.surface[0], app) if kinds.surface else Surface(),
    )


def _ranges_to_read(sources: Sources, kinds: _ByKind) -> tuple[list[str], bool]:
    """The ``torch:`` ranges the release is chosen from, and whether they are the caller's:
    the caller's device files' when it gave some over the bundled spec (a vendor file paired
    with torch 2.9 is read for 2.9 wherever it is loaded), else every device file's."""
    docs = [d for ds in kinds.devices.values() for d in ds]
    own = [d for d in docs if not sources.is_beneath(d)] if sources.beneath else []
    return sorted({d.data["torch"] for d in (own or docs)}), bool(own)


def _registry_problems(
    names: Collection[str],
    sources: Sources,
    kinds: _ByKind,
    devices: dict[str, DeviceSpec],
    ops: dict[str, OpInfo],
    version: str,
) -> list[SpecProblem]:
    """Op names the torch's registry lacks, for a spec describing the installed release.

    (Older releases had operators the installed torch no longer has.) The shared files
    (op catalog, rules) are checked only where their own device files claim this
    release: read beneath a user's file for a newer torch, their ops the torch lacks
    are 'not in this torch'.
    """
    claimed = not sources.beneath or any(
        d.data["kind"] == "device" and specifier_contains(d.data["torch"], version)
        for d in sources.docs
        if sources.is_beneath(d)
    )
    probs = checks.registry_problems(
        names, devices.values(), ops.values() if claimed else (), raw_files=sources.docs
    )
    if kinds.rules and claimed:
        probs.extend(checks.rules_registry_problems(names, kinds.rules[0]))
    return probs

"""Which torch release a spec entry describes: ``since``/``until``, ``torch:`` ranges, builds.

Spec entries carry ``since`` (inclusive) and ``until`` (exclusive) releases, device
files a PEP 440 ``torch:`` range, and an entry registered only in some builds of a
release a ``build:`` condition (``cudnn``: only where torch was built with cuDNN, as
the CUDA wheels are and the CPU wheels are not). Everything here is pure: the
torch's release, build and operator names arrive as a :class:`TorchFacts` value
(``reference_impl.engine.torch_registry.installed_torch()`` for the installed one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .problems import SpecProblem
from .yaml_source import YamlDocument

_RELEASE_RE = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?")


def parse_release(version: str) -> tuple[int, int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13, 0)``; pre-release and local parts are ignored."""
    m = _RELEASE_RE.match(version.strip())
    if not m:
        raise ValueError(f"not a torch version: {version!r}")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def same_release(a: str, b: str) -> bool:
    """Same ``X.Y`` release (patch releases do not change autocast's lists)."""
    return parse_release(a)[:2] == parse_release(b)[:2]


def version_in(version: str, since: str | None, until: str | None) -> bool:
    """``since`` inclusive, ``until`` exclusive, both on releases (2.13 == 2.13.0)."""
    v = parse_release(version)
    if since and v < parse_release(since):
        return False
    return not (until and v >= parse_release(until))


def specifier_contains(spec: str, version: str) -> bool:
    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False


def nearest_covered_version(ranges: Iterable[str], version: str) -> str | None:
    """The ``X.Y`` release closest to ``version`` that one of ``ranges`` contains.

    Candidates are ``version`` itself and, per major release the ranges mention,
    every minor release from one below their lowest bound to one above their
    highest (an exclusive upper bound ``<2.14`` covers 2.13). Between two equally
    close releases the newer wins.
    """
    ranges = list(ranges)
    target = parse_release(version)
    candidates: set[tuple[int, int]] = {target[:2]}
    bounds: dict[int, list[int]] = {}
    for r in ranges:
        for major, minor in re.findall(r"(\d+)\.(\d+)", r):
            bounds.setdefault(int(major), []).append(int(minor))
    for major, minors in bounds.items():
        candidates.update((major, m) for m in range(max(min(minors) - 1, 0), max(minors) + 2))
    covered = [c for c in candidates if any(specifier_contains(r, f"{c[0]}.{c[1]}") for r in ranges)]
    if not covered:
        return None
    best = min(covered, key=lambda c: (abs((c[0] - target[0]) * 1000 + c[1] - target[1]), -c[1]))
    return f"{best[0]}.{best[1]}"


@dataclass(frozen=True)
class TorchFacts:
    """What a load is told about the torch it reads the spec for (this package never imports torch).

    ``reference_impl.engine.torch_registry.installed_torch()`` gives the installed torch's.
    Without torch at hand, name the release alone: ``TorchFacts("2.13.0")`` reads no
    ``build:``-conditional entry and checks no op name against a registry.
    """

    version: str  # the release, e.g. "2.13.0"
    build: frozenset[str] = frozenset()  # build features that ``build:`` conditions name ("cudnn")
    op_names: frozenset[str] | None = None  # every operator overload it knows; None: not known


def release_to_read(ranges: Iterable[str], installed: str, asked: str | None, nearest: bool) -> str:
    """The release a load describes: ``asked``, else ``installed``.

    With ``nearest``, an installed release that none of the device files' ``ranges``
    covers is read as the nearest covered one.
    """
    if asked:
        return asked
    ranges = list(ranges)
    if nearest and not any(specifier_contains(r, installed) for r in ranges):
        return nearest_covered_version(ranges, installed) or installed
    return installed


def device_files_for(
    by_device: Mapping[str, Sequence[YamlDocument]], version: str, where: str
) -> tuple[dict[str, YamlDocument], list[SpecProblem]]:
    """Per device, its one file whose ``torch:`` range holds ``version``.

    Problems: two files of a device for the release; no device file for it at all
    (reported at ``where``, with the nearest covered release to pass instead).
    """
    chosen: dict[str, YamlDocument] = {}
    probs: list[SpecProblem] = []
    uncovered: set[str] = set()
    for name, docs in by_device.items():
        matching = [d for d in docs if specifier_contains(d.data["torch"], version)]
        for d in matching[1:]:
            probs.append(
                SpecProblem(
                    d.file,
                    d.line_of(("torch",)),
                    f"two files describe device {name!r} for torch {version} "
                    f"(also {matching[0].file}); make their 'torch' ranges disjoint",
                )
            )
        if matching:
            chosen[name] = matching[0]
        else:
            uncovered.update(d.data["torch"] for d in docs)
    if by_device and not chosen:
        ranges = sorted(uncovered)
        near = nearest_covered_version(ranges, version)
        probs.append(
            SpecProblem(
                where,
                0,
                f"no device spec describes torch {version} (the files cover {', '.join(ranges)}); "
                + (
                    f"the nearest covered version is {near}: pass --torch-version {near} to use it, "
                    if near
                    else "pass --torch-version to pick one, "
                )
                + "or probe this torch with 'autocast-spec probe --device D' to write one",
            )
        )
    return chosen, probs


@dataclass(frozen=True)
class Applicability:
    """The torch release and build features an entry is judged for."""

    version: str
    build: frozenset[str]

    def admits(self, entry: Mapping[str, Any]) -> bool:
        """Does a YAML entry with optional ``since``/``until``/``build`` apply here?"""
        if not version_in(self.version, entry.get("since"), entry.get("until")):
            return False
        needs = entry.get("build")
        return needs is None or needs in self.build


@dataclass(frozen=True)
class VersionChoice:
    """The release a spec is read for, and, when it is not the installed one, why."""

    version: str
    installed: str

    @property
    def fallback(self) -> bool:
        return not same_release(self.version, self.installed)

    def note(self) -> str:
        if not self.fallback:
            return ""
        return (
            f"the spec does not cover torch {self.installed}: running against the nearest covered "
            f"version, {self.version}; ops this torch lacks are skipped as 'not in this torch'; "
            f"to describe this torch, probe it: autocast-spec probe --device D -o D.yaml, "
            f"then --spec D.yaml"
        )

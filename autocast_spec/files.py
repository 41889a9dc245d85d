"""Which spec files a load reads, read and checked against the JSON Schema.

With no paths: the bundled spec. A user's files that hold no ``rules`` file are
overlaid on the bundled spec (a vendor's device file can ``extends: cuda``
without copying anything); a device the user's files define replaces the
bundled one of the same name.

The out-of-tree vendor specs in ``spec/vendors/`` ship with the bundled spec but
are read only when named (``--spec spec/vendors/torch_xla.yaml``, or the directory
itself): a directory read as a spec skips its ``vendors/`` folder, so the built-in
devices mean what they always meant (``vendor_spec_dir``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .problems import SpecError, SpecProblem
from .schema import schema_problems, spec_wording
from .yaml_source import YamlDocument, read_yaml

SCHEMA_FILE = "autocast-spec.schema.json"


def bundled_spec_dir() -> Path:
    """The spec shipped with the package (in a wheel) or the repository's ``spec/``."""
    here = Path(__file__).resolve().parent
    packaged = here / "data"  # a wheel: pyproject maps spec/ to autocast_spec.data
    if (packaged / SCHEMA_FILE).is_file():
        return packaged
    return here.parent / "spec"  # an editable install or a checkout


VENDORS = "vendors"


def vendor_spec_dir() -> Path:
    """The out-of-tree vendor specs shipped with the bundled spec (read only when named)."""
    return bundled_spec_dir() / VENDORS


def spec_files(paths: Iterable[Path]) -> list[Path]:
    """Expand directories into their ``*.yaml`` files (recursively, sorted; not ``vendors/``)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(
                sorted(
                    q for q in p.rglob("*.yaml") if q.is_file() and VENDORS not in q.relative_to(p).parts[:-1]
                )
            )
        else:
            out.append(p)
    return out


def _display_name(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_documents(files: Sequence[Path], probs: list[SpecProblem]) -> list[YamlDocument]:
    """The files that parse and satisfy the schema; the problems of the others go to ``probs``."""
    schema = bundled_spec_dir() / SCHEMA_FILE
    docs = []
    for f in files:
        try:
            doc = read_yaml(f, _display_name(f))
        except SpecProblem as p:
            probs.append(p)
            continue
        if not isinstance(doc.data, dict):
            probs.append(SpecProblem(doc.file, 1, "a spec file must be a mapping with a 'kind:' key"))
            continue
        found = schema_problems(doc, schema, spec_wording)
        if found:
            probs.extend(found)
            continue
        docs.append(doc)
    return docs


def _files_for(paths: Sequence[Path] | None) -> tuple[list[Path], list[SpecProblem]]:
    probs: list[SpecProblem] = []
    if not paths:
        return spec_files([bundled_spec_dir()]), probs
    user = []
    for p in paths:
        if not p.exists():
            probs.append(SpecProblem(str(p), 0, "no such file or directory"))
        else:
            user.extend(spec_files([p]))
    if not user and not probs:
        probs.append(SpecProblem(", ".join(map(str, paths)), 0, "no *.yaml spec files found"))
    return user, probs


@dataclass(frozen=True)
class Sources:
    """The documents a load reads: the caller's files, and the bundled ones overlaid beneath them."""

    docs: tuple[YamlDocument, ...]  # the bundled documents beneath first, then the caller's
    files: tuple[Path, ...]
    beneath: frozenset[int]  # id() of the bundled documents read beneath the caller's files

    def is_beneath(self, doc: YamlDocument) -> bool:
        return id(doc) in self.beneath


def gather(paths: Sequence[Path] | None) -> Sources:
    """The documents of ``paths`` (None: the bundled spec), the bundled spec beneath them.

    Raises :class:`SpecError` with every file's problems (missing, unreadable, invalid).
    """
    files, probs = _files_for(paths)
    docs = read_documents(files, probs)
    base: list[YamlDocument] = []
    if paths and docs and not any(d.data["kind"] == "rules" for d in docs):
        user_devices = {d.data.get("device") for d in docs if d.data["kind"] == "device"}
        base = read_documents(spec_files([bundled_spec_dir()]), probs)
        base = [d for d in base if not (d.data["kind"] == "device" and d.data["device"] in user_devices)]
        docs = base + docs
        files = [Path(d.file) for d in docs]
    if probs:
        raise SpecError(probs)
    return Sources(tuple(docs), tuple(files), frozenset(id(d) for d in base))


def device_torch_ranges(paths: Sequence[Path] | None = None) -> list[str]:
    """The ``torch:`` ranges of the device files in ``paths`` (default: the bundled spec)."""
    files, _ = _files_for(paths)
    docs = read_documents(files, [])
    return sorted({d.data["torch"] for d in docs if d.data.get("kind") == "device"})


def content_hash(files: Iterable[Path]) -> str:
    """sha256 over the spec files' names and bytes, in a stable order."""
    h = hashlib.sha256()
    for f in sorted(set(files), key=lambda p: p.name + str(p)):
        try:
            data = f.read_bytes()
        except OSError:
            continue
        h.update(f.name.encode())
        h.update(b"\0")
        h.update(data)
    return h.hexdigest()


def names_vendor(device: str, paths: Sequence[Path] | None = None) -> bool:
    """Whether the device file for ``device`` names a vendor's package (a ``vendor:`` block: an
    out-of-tree release whose native code the suite runs): the caller's files in ``paths`` first,
    else the bundled spec. Only files that name the device are parsed (a quick look, before the
    spec is loaded)."""
    user, _ = _files_for(paths) if paths else ([], [])
    named = re.compile(rf"^device:\s*['\"]?{re.escape(device)}['\"]?\s*$", re.MULTILINE)
    for files in (user, spec_files([bundled_spec_dir()])):
        hits = [f for f in files if named.search(f.read_text(encoding="utf-8", errors="replace"))]
        docs = [d for d in read_documents(hits, []) if d.data.get("kind") == "device"]
        if docs:
            return any(d.data.get("vendor") for d in docs)
    return False

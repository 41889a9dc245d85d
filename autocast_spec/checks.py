"""Semantic checks of a spec (beyond the JSON Schema), some against a torch's operator names.

The operator names come from the caller (:attr:`TorchFacts.op_names`); this
package never imports torch.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Sequence

from .catalog import OpInfo
from .model import DeviceSpec, JitLimitation
from .problems import SpecProblem
from .yaml_source import YamlDocument


def did_you_mean(op: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(op, list(names), n=3, cutoff=0.75)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def unknown_op_message(op: str, names: Collection[str]) -> str:
    return (
        f"{op} is not an operator of the installed torch's registry{did_you_mean(op, names)}"
        " (names are namespace::name[.overload], as torch._C._dispatch_dump prints them)"
    )


def registry_problems(
    names: Collection[str],
    devices: Iterable[DeviceSpec],
    ops: Iterable[OpInfo],
    raw_files: Sequence[YamlDocument] = (),
) -> list[SpecProblem]:
    """Op names that are not among ``names`` (the torch's operator registry). An op of a namespace
    the registry has no operator of (a vendor's own, ``torch_ipex::``) is checked only where its
    package is loaded: the registry cannot tell it from a misspelling before."""
    loaded = {n.split("::", 1)[0] for n in names}
    probs = []
    for dev in devices:
        for entry in dev.ops.values():
            if entry.op not in names and _namespace(entry.op) in loaded:
                probs.append(SpecProblem(entry.loc.file, entry.loc.line, unknown_op_message(entry.op, names)))
    for info in ops:
        if info.op not in names and _namespace(info.op) in loaded:
            probs.append(SpecProblem(info.loc.file, info.loc.line, unknown_op_message(info.op, names)))
        target = info.append_dtype_target
        if target and target not in names:
            probs.append(SpecProblem(info.loc.file, info.loc.line, unknown_op_message(target, names)))
    # 'remove:' entries and ops outside this torch version's range are not in the
    # model; check the removes the raw files name too.
    for doc in raw_files:
        if doc.data.get("kind") != "device":
            continue
        for i, item in enumerate(doc.data.get("remove") or []):
            op = item if isinstance(item, str) else item.get("op")
            if (
                isinstance(op, str)
                and op not in names
                and not (isinstance(item, dict) and (item.get("since") or item.get("until")))
            ):
                probs.append(SpecProblem(doc.file, doc.line_of(("remove", i)), unknown_op_message(op, names)))
    return sorted(set(probs), key=SpecProblem.sort_key) if probs else []


def _namespace(op: str) -> str:
    return op.split("::", 1)[0]


def rules_registry_problems(names: Collection[str], doc: YamlDocument) -> list[SpecProblem]:
    """Op names in the rules file (the unlisted watchlist) that are not among ``names``."""
    return [
        SpecProblem(doc.file, doc.line_of(("unlisted_watchlist", i)), unknown_op_message(op, names))
        for i, op in enumerate(doc.data.get("unlisted_watchlist") or [])
        if op not in names
    ]


def mandatory_core_problems(doc: YamlDocument, categories: Collection[str]) -> list[SpecProblem]:
    """``mandatory_core`` names that are not categories the suite can make mandatory."""
    known = ", ".join(sorted(categories))
    return [
        SpecProblem(
            doc.file,
            doc.line_of(("mandatory_core", i)),
            f"mandatory_core: {name!r} is not a test category that can be mandatory "
            f"(known: {known}){did_you_mean(name, categories)}",
        )
        for i, name in enumerate(doc.data.get("mandatory_core") or [])
        if name not in categories
    ]


def limitation_problems(limitations: Sequence[JitLimitation]) -> list[SpecProblem]:
    seen: dict[str, JitLimitation] = {}
    probs = []
    for lim in limitations:
        if lim.id in seen:
            probs.append(
                SpecProblem(
                    lim.loc.file,
                    lim.loc.line,
                    f"limitation id {lim.id!r} also at {seen[lim.id].loc}",
                )
            )
        seen[lim.id] = lim
        if lim.expect == "error" and not lim.message:
            probs.append(
                SpecProblem(lim.loc.file, lim.loc.line, f"{lim.id}: expect 'error' needs the 'message'")
            )
        if lim.expect == "differs" and not lim.differs:
            probs.append(
                SpecProblem(
                    lim.loc.file,
                    lim.loc.line,
                    f"{lim.id}: expect 'differs' needs 'differs' entries",
                )
            )
    return probs

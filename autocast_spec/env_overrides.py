"""``env_overrides``: environment variables that replace a policy's op list at run time.

The Habana Gaudi bridge reads ``PT_HPU_AUTOCAST_LOWER_PRECISION_OPS_LIST`` and
``PT_HPU_AUTOCAST_FP32_OPS_LIST``: each names a file of op names that replaces the
bridge's default list. A device file states such variables; the loader applies
them from the environment the spec is read in, so the suite and the reference
expect what the backend does in that environment. The rules (also in the schema):

- the variables are taken in order; one that is unset, or whose file cannot be
  read, leaves its policies' default ops in place (as the bridge does);
- a file's lines name ops: ``aten::op[.overload]``, or a bare function name for
  every op of that name the device lists; blank lines and ``#`` comments are
  skipped; names that match no op the device lists are ignored (the bridge
  registers only the ops it has a kernel call for);
- a listed op keeps its policy when it is one of the variable's ``policies``, else
  takes the first of them; an op of those policies that the file does not list is
  no longer autocast; an op an earlier variable placed (or left in its defaults)
  stays where it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from .common import SourceLoc, frozen_map
from .model import DeviceSpec, OpPolicy


def _named(name: str, ops: Mapping[str, OpPolicy]) -> list[str]:
    if "::" in name:
        return [name] if name in ops else []
    return [op for op in ops if op.split("::", 1)[1].split(".", 1)[0] == name]


def apply_env_overrides(ds: DeviceSpec, environ: Mapping[str, str]) -> DeviceSpec:
    """``ds`` with the overrides its environment sets (its ``notes`` say which were applied)."""
    if not ds.env_overrides:
        return ds
    ops = dict(ds.ops)
    placed: set[str] = set()
    notes = list(ds.notes)
    for ov in ds.env_overrides:
        mine = {op for op, e in ds.ops.items() if e.policy in ov.policies}
        path = environ.get(ov.variable)
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines() if path else None
        except OSError as err:
            notes.append(f"{ov.variable}={path}: cannot be read ({err.strerror}); the defaults stay")
            lines = None
        if lines is None:
            placed |= mine
            continue
        listed: dict[str, int] = {}
        for n, raw in enumerate(lines, start=1):
            name = raw.split("#", 1)[0].strip()
            for op in _named(name, ds.ops) if name else []:
                listed.setdefault(op, n)
        for op in mine - set(listed) - placed:
            ops.pop(op, None)
        for op, n in listed.items():
            if op in placed:
                continue
            entry = ds.ops[op]
            if entry.policy not in ov.policies:
                entry = OpPolicy(op, ov.policies[0], SourceLoc(str(path), n), note=f"from {ov.variable}")
            ops[op] = entry
            placed.add(op)
        names = ", ".join(p.value for p in ov.policies)
        notes.append(f"{ov.variable}={path}: its {len(listed)} ops replace the {names} list")
    return replace(ds, ops=frozen_map(dict(sorted(ops.items()))), notes=tuple(notes))

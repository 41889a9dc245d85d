"""Device files -> :class:`~autocast_spec.model.DeviceSpec`: entries, ``remove:``, ``extends:``.

A device file lists ops by policy; ``extends`` starts from another device's
resolved list (``remove`` drops parent entries, ``ops`` adds or replaces) and
inherits its dtypes and unsupported-dtype rule, never its dispatch key or
``builtin``. Problems go to the caller's list, each at its file and line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .builders import known_bugs_of
from .common import SourceLoc, frozen_map
from .env_overrides import apply_env_overrides
from .higher_order import HigherOrderKernel
from .imports import loader_variable_problem
from .model import (
    DeviceSpec,
    EnvOverride,
    NoAutocast,
    OpPolicy,
    Policy,
    PolicyWrapper,
    SourceForms,
    UnsupportedDtypeRule,
    VendorRelease,
)
from .problems import SpecProblem
from .versions import Applicability
from .yaml_source import YamlDocument


@dataclass
class RawDevice:
    """One device file's own entries for the release, before ``extends`` is resolved."""

    doc: YamlDocument
    device: str
    extends: str | None
    ops: dict[str, OpPolicy]
    removes: list[tuple[str, int]]
    fields: dict[str, Any]
    loc: SourceLoc


def _entry(item: Any) -> dict[str, Any]:
    return {"op": item} if isinstance(item, str) else dict(item)


def _by_dtype(e: Mapping[str, Any]) -> Mapping[str, Policy | None]:
    """``by_dtype: {float16: fp32, bfloat16: none}`` -> dtype -> Policy (None: uncast)."""
    return frozen_map({dt: None if p == "none" else Policy(p) for dt, p in (e.get("by_dtype") or {}).items()})


def _vendor(block: Mapping[str, Any]) -> VendorRelease:
    """A device file's ``vendor:`` block (its ``environment`` values as the strings they are set as)."""
    env = {str(k): str(v) for k, v in (block.get("environment") or {}).items()}
    forms = block.get("source_forms")
    return VendorRelease(
        block["package"],
        block["version"],
        block["module"],
        frozen_map(env),
        _forms(forms) if forms else None,
        str(block.get("runtime", "")),
    )


def _forms(block: Mapping[str, Any]) -> SourceForms:
    """``vendor.source_forms``: the vendor's registration forms, as ``extract`` reads them."""
    wrappers = {
        name: PolicyWrapper(
            tuple(w["dtypes"]),
            frozen_map({k: None if p == "none" else Policy(p) for k, p in w["policies"].items()}),
        )
        for name, w in (block.get("wrappers") or {}).items()
    }
    macros = frozen_map(dict(block.get("block_macros") or {}))
    return SourceForms(block["source"], macros, frozen_map(wrappers))


def _environment_problems(doc: YamlDocument) -> list[SpecProblem]:
    """``vendor.environment`` entries that would change how processes load code (refused)."""
    env = (doc.data.get("vendor") or {}).get("environment") or {}
    return [
        SpecProblem(doc.file, doc.line_of(("vendor", "environment", name)), why)
        for name in env
        if (why := loader_variable_problem(str(name))) is not None
    ]


def _no_autocast(doc: YamlDocument, probs: list[SpecProblem]) -> NoAutocast:
    """``no_autocast``: the backend has no autocast, so the file lists no ops or dtypes of it."""
    d = doc.data
    block = d["no_autocast"]
    line = doc.line_of(("no_autocast",))
    said = [k for k in ("ops", "remove", "extends", "supported_dtypes") if d.get(k)]
    if said:
        probs.append(
            SpecProblem(doc.file, line, f"no_autocast: the file may not also give {', '.join(said)}")
        )
    rule = d.get("unsupported_dtype") or {}
    if rule.get("action") != "warn_and_disable":
        probs.append(
            SpecProblem(
                doc.file,
                line,
                "no_autocast: give unsupported_dtype {action: warn_and_disable, message: ...}, the warning "
                "torch.autocast gives for every dtype on a backend without autocast",
            )
        )
    if block["direct_enabling"] == "error" and not block.get("message"):
        probs.append(SpecProblem(doc.file, line, "no_autocast: direct_enabling error needs its 'message'"))
    return NoAutocast(
        block["reason"], block["direct_enabling"], SourceLoc(doc.file, line), str(block.get("message", ""))
    )


def raw_device(doc: YamlDocument, app: Applicability, probs: list[SpecProblem]) -> RawDevice:
    """The entries of device file ``doc`` that ``app`` admits (duplicates: problems in ``probs``)."""
    d = doc.data
    ops: dict[str, OpPolicy] = {}
    first_seen: dict[str, tuple[str, int]] = {}
    for pol_name, items in (d.get("ops") or {}).items():
        policy = Policy(pol_name)
        for i, item in enumerate(items or []):
            e = _entry(item)
            line = doc.line_of(("ops", pol_name, i))
            op = e["op"]
            if op in first_seen:
                prev_pol, prev_line = first_seen[op]
                what = "twice under" if prev_pol == pol_name else "under two policies:"
                detail = pol_name if prev_pol == pol_name else f"{prev_pol} and {pol_name}"
                probs.append(
                    SpecProblem(
                        doc.file,
                        line,
                        f"{op} is listed {what} {detail} for device {d['device']!r} "
                        f"(first at line {prev_line}); keep one",
                    )
                )
                continue
            first_seen[op] = (pol_name, line)
            if policy is Policy.BANNED and not e.get("message"):
                probs.append(
                    SpecProblem(
                        doc.file,
                        line,
                        f"banned op {op} has no 'message': write the error the backend must "
                        "raise, as {op: ..., message: ...}",
                    )
                )
            if policy is Policy.BANNED and e.get("by_dtype"):
                probs.append(SpecProblem(doc.file, line, f"banned op {op}: 'by_dtype' is not for banned ops"))
            if policy is not Policy.BANNED and e.get("message"):
                probs.append(SpecProblem(doc.file, line, f"{op}: 'message' is only for banned ops"))
            if not app.admits(e):
                continue
            ops[op] = OpPolicy(
                op=op,
                policy=policy,
                loc=SourceLoc(doc.file, line),
                message=e.get("message"),
                note=e.get("note"),
                by_dtype=_by_dtype(e),
            )
    fields_bugs = known_bugs_of(doc, app.version, d["torch"])  # the vendor's own, not inherited
    probs.extend(_environment_problems(doc))
    removes = []
    for i, item in enumerate(d.get("remove") or []):
        e = _entry(item)
        if app.admits(e):
            removes.append((e["op"], doc.line_of(("remove", i))))
    fields = {
        k: d[k]
        for k in (
            "dispatch_key",
            "default_dtype",
            "supported_dtypes",
            "unsupported_dtype",
            "builtin",
            "description",
            "torch",
            "cast_cache",
            "cast_only_between",
            "env_overrides",
            "provenance",
            "not_observed",
            "vendor",
            "registered_only",
        )
        if k in d
    }
    if fields_bugs:
        fields["known_bugs"] = fields_bugs
    if "no_autocast" in d:
        fields["no_autocast"] = _no_autocast(doc, probs)
    fields["higher_order_ops"] = tuple(  # the file's own: never inherited through extends
        HigherOrderKernel(
            e["op"], e["policy"], tuple(e.get("args") or ()), SourceLoc(doc.file, line), e.get("note", "")
        )
        for i, e in enumerate(d.get("higher_order_ops") or ())
        if app.admits(e) and (line := doc.line_of(("higher_order_ops", i)))
    )
    return RawDevice(doc, d["device"], d.get("extends"), ops, removes, fields, SourceLoc(doc.file, 1))


def resolve_devices(
    raw: Mapping[str, RawDevice], probs: list[SpecProblem], environ: Mapping[str, str] | None = None
) -> dict[str, DeviceSpec]:
    """Every device with its ``extends`` chain applied; cycles, unknown parents and gaps to ``probs``.

    ``env_overrides`` are applied from ``environ`` (default: this process's environment).
    """
    resolved: dict[str, DeviceSpec] = {}
    merged_fields: dict[str, dict[str, Any]] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> tuple[dict[str, OpPolicy], dict[str, Any]] | None:
        r = raw[name]
        if name in merged_fields:
            return dict(resolved_ops[name]), dict(merged_fields[name])
        ops: dict[str, OpPolicy] = {}
        fields: dict[str, Any] = {}
        if r.extends:
            if r.extends in chain or r.extends == name:
                cycle = " -> ".join((*chain, name, r.extends))
                probs.append(
                    SpecProblem(r.doc.file, r.doc.line_of(("extends",)), f"cycle in 'extends': {cycle}")
                )
                return None
            if r.extends not in raw:
                probs.append(
                    SpecProblem(
                        r.doc.file,
                        r.doc.line_of(("extends",)),
                        f"'extends: {r.extends}' names no device spec for this torch version "
                        f"(known: {', '.join(sorted(raw))})",
                    )
                )
                return None
            parent = resolve(r.extends, (*chain, name))
            if parent is None:
                return None
            ops, pfields = parent
            # inherited: dtypes, unsupported-dtype rule, description; never the key or builtin
            fields = {
                k: v
                for k, v in pfields.items()
                if k in ("default_dtype", "supported_dtypes", "unsupported_dtype")
            }
        for op, line in r.removes:
            if op not in ops:
                probs.append(
                    SpecProblem(
                        r.doc.file,
                        line,
                        f"'remove: {op}' but {r.extends or 'no parent'} does not list {op}",
                    )
                )
            ops.pop(op, None)
        ops.update(r.ops)
        fields.update(r.fields)
        merged_fields[name] = fields
        resolved_ops[name] = ops
        return dict(ops), dict(fields)

    resolved_ops: dict[str, dict[str, OpPolicy]] = {}
    for name in sorted(raw):
        res = resolve(name, ())
        if res is None:
            continue
        ops, fields = res
        r = raw[name]
        none = fields.get("no_autocast")
        needed = ("dispatch_key", "default_dtype") + (() if none else ("supported_dtypes",))
        missing = [k for k in needed if k not in fields]
        if missing:
            probs.append(
                SpecProblem(
                    r.doc.file,
                    1,
                    f"device {name!r} needs {', '.join(missing)} (directly or through 'extends')",
                )
            )
            continue
        if not none and fields["default_dtype"] not in fields["supported_dtypes"]:
            probs.append(
                SpecProblem(
                    r.doc.file,
                    r.doc.line_of(("default_dtype",)),
                    f"default_dtype {fields['default_dtype']} is not in supported_dtypes "
                    f"{fields['supported_dtypes']}",
                )
            )
        ud = fields.get("unsupported_dtype")
        overrides = tuple(
            EnvOverride(o["variable"], tuple(Policy(p) for p in o["policies"]), o.get("note", ""))
            for o in fields.get("env_overrides") or ()
        )
        ds = DeviceSpec(
            device=name,
            dispatch_key=fields["dispatch_key"],
            torch_versions=fields["torch"],
            default_dtype=fields["default_dtype"],
            supported_dtypes=tuple(fields.get("supported_dtypes") or ()),
            ops=frozen_map(dict(sorted(ops.items()))),
            loc=r.loc,
            builtin=bool(fields.get("builtin", False)),
            extends=r.extends,
            description=str(fields.get("description", "")).strip(),
            unsupported_dtype=UnsupportedDtypeRule(ud["action"], ud["message"]) if ud else None,
            cast_cache=bool(fields.get("cast_cache", True)),
            cast_only_between=tuple(fields.get("cast_only_between") or ()),
            env_overrides=overrides,
            provenance=frozen_map(fields.get("provenance") or {}),
            not_observed=frozen_map(dict(fields.get("not_observed") or {})),
            vendor=_vendor(fields["vendor"]) if fields.get("vendor") else None,
            known_bugs=tuple(fields.get("known_bugs") or ()),
            registered_only=frozen_map({e["op"]: e["reason"] for e in fields.get("registered_only") or ()}),
            no_autocast=none,
            higher_order_ops=tuple(fields.get("higher_order_ops") or ()),
        )
        resolved[name] = apply_env_overrides(ds, os.environ if environ is None else environ)
    return resolved

"""YAML spec files -> one typed, immutable :class:`~autocast_spec.model.Spec`.

Steps: read each file (:mod:`.yaml_source`), validate it against the JSON Schema,
build the per-file pieces, filter by torch version, resolve ``extends``, and run
the semantic checks (:mod:`.checks`). Every problem found is collected and
raised together as one :class:`SpecError`, each with its file and line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from reference_impl.torch_registry import build_features, installed_torch_version

from . import checks
from .model import (
    Arg,
    CacheRule,
    ContextRules,
    CustomOpRules,
    DeviceSpec,
    Divergence,
    DtypeArg,
    Eligibility,
    EntryPoint,
    JitLimitation,
    KernelGap,
    KnownBug,
    ListArg,
    Literal,
    ModeDivergences,
    OpInfo,
    OpPolicy,
    Policy,
    PromoteRule,
    Rules,
    Sample,
    SourceLoc,
    Spec,
    TensorArg,
    Tolerance,
    UnsupportedDtypeRule,
    frozen_map,
)
from .problems import SpecError, SpecProblem
from .versions import (
    Applicability,
    nearest_covered_version,
    same_release,
    specifier_contains,
)
from .yaml_source import PathKey, YamlDocument, read_yaml

SCHEMA_FILE = "autocast-spec.schema.json"


def bundled_spec_dir() -> Path:
    """The spec shipped with the package (in a wheel) or the repository's ``spec/``."""
    here = Path(__file__).resolve().parent
    packaged = here / "data"  # a wheel: pyproject maps spec/ to autocast_spec.data
    if (packaged / SCHEMA_FILE).is_file():
        return packaged
    return here.parent / "spec"  # an editable install or a checkout


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    path = bundled_spec_dir() / SCHEMA_FILE
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def spec_files(paths: Iterable[Path]) -> list[Path]:
    """Expand directories into their ``*.yaml`` files (recursively, sorted)."""
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*.yaml") if q.is_file()))
        else:
            out.append(p)
    return out


def _display_name(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------
# Schema validation with friendly, line-numbered messages
# ---------------------------------------------------------------------------


def _path_text(path: Sequence[str | int]) -> str:
    return " > ".join(str(p) for p in path) or "(top level)"


def _friendly(err: jsonschema.ValidationError) -> str:
    schema: dict[str, Any] = err.schema if isinstance(err.schema, dict) else {}
    where = _path_text(list(err.absolute_path))
    inst = err.instance
    if err.validator == "additionalProperties":
        extra = sorted(set(inst) - set(schema.get("properties", {}))) if isinstance(inst, dict) else []
        allowed = sorted(schema.get("properties", {}))
        path = list(err.absolute_path)
        if path and path[-1] == "ops" and allowed and set(allowed) <= {p.value for p in Policy}:
            return (
                f"{where}: unknown policy {', '.join(map(repr, extra))}; known policies: {', '.join(allowed)}"
            )
        return f"{where}: unknown key {', '.join(map(repr, extra))}; allowed: {', '.join(allowed)}"
    if err.validator == "enum":
        choices = ", ".join(str(v) for v in err.validator_value)  # type: ignore[union-attr]
        return f"{where}: {inst!r} is not one of {choices}"
    if err.validator == "pattern":
        desc = schema.get("description")
        if "dtype" in str(schema.get("pattern", "")) or "float16" in str(schema.get("pattern", "")):
            return f"{where}: unknown dtype {inst!r}"
        return f"{where}: {inst!r} is not valid" + (f" ({desc})" if desc else "")
    if err.validator == "required":
        return f"{where}: {err.message}"
    if err.validator in ("oneOf", "anyOf") and err.context:
        best = jsonschema.exceptions.best_match(err.context)
        return _friendly(best)
    return f"{where}: {err.message}"


def schema_problems(doc: YamlDocument) -> list[SpecProblem]:
    validator = jsonschema.Draft202012Validator(load_schema())
    probs = []
    for err in validator.iter_errors(doc.data):
        if err.validator in ("if", "allOf") and err.context:
            errs: Iterable[jsonschema.ValidationError] = err.context
        else:
            errs = [err]
        for e in errs:
            line = doc.line_of(tuple(e.absolute_path))
            probs.append(SpecProblem(doc.file, line, _friendly(e)))
    # dedupe, keep order
    seen: set[str] = set()
    unique = []
    for p in probs:
        if str(p) not in seen:
            seen.add(str(p))
            unique.append(p)
    return unique


# ---------------------------------------------------------------------------
# Building model pieces from validated documents
# ---------------------------------------------------------------------------


@dataclass
class _RawDevice:
    doc: YamlDocument
    device: str
    extends: str | None
    ops: dict[str, OpPolicy]
    removes: list[tuple[str, int]]
    fields: dict[str, Any]
    loc: SourceLoc


def _entry(item: Any) -> dict[str, Any]:
    return {"op": item} if isinstance(item, str) else dict(item)


def _build_raw_device(doc: YamlDocument, app: Applicability, probs: list[SpecProblem]) -> _RawDevice:
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
            if policy is not Policy.BANNED and e.get("message"):
                probs.append(SpecProblem(doc.file, line, f"{op}: 'message' is only for banned ops"))
            if not app.admits(e):
                continue
            ops[op] = OpPolicy(
                op=op,
                policy=policy,
                loc=SourceLoc(doc.file, line),
                message=e.get("message"),
                since=e.get("since"),
                until=e.get("until"),
                note=e.get("note"),
            )
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
        )
        if k in d
    }
    return _RawDevice(doc, d["device"], d.get("extends"), ops, removes, fields, SourceLoc(doc.file, 1))


def _resolve_devices(raw: Mapping[str, _RawDevice], probs: list[SpecProblem]) -> dict[str, DeviceSpec]:
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
        missing = [k for k in ("dispatch_key", "default_dtype", "supported_dtypes") if k not in fields]
        if missing:
            probs.append(
                SpecProblem(
                    r.doc.file,
                    1,
                    f"device {name!r} needs {', '.join(missing)} (directly or through 'extends')",
                )
            )
            continue
        if fields["default_dtype"] not in fields["supported_dtypes"]:
            probs.append(
                SpecProblem(
                    r.doc.file,
                    r.doc.line_of(("default_dtype",)),
                    f"default_dtype {fields['default_dtype']} is not in supported_dtypes "
                    f"{fields['supported_dtypes']}",
                )
            )
        ud = fields.get("unsupported_dtype")
        resolved[name] = DeviceSpec(
            device=name,
            dispatch_key=fields["dispatch_key"],
            torch_versions=fields["torch"],
            default_dtype=fields["default_dtype"],
            supported_dtypes=tuple(fields["supported_dtypes"]),
            ops=frozen_map(dict(sorted(ops.items()))),
            loc=r.loc,
            builtin=bool(fields.get("builtin", False)),
            extends=r.extends,
            description=str(fields.get("description", "")).strip(),
            unsupported_dtype=UnsupportedDtypeRule(ud["action"], ud["message"]) if ud else None,
        )
    return resolved


def _build_arg(value: Any) -> Arg:
    if isinstance(value, list):
        return ListArg(tuple(_build_arg(v) for v in value))
    if isinstance(value, dict):
        if "t" in value:
            return TensorArg(
                shape=tuple(value["t"]),
                dtype=value.get("dtype", "float"),
                domain=value.get("domain", "normal"),
                requires_grad=bool(value.get("requires_grad", False)),
            )
        return DtypeArg(value["scalar_type"])
    return Literal(value)


def _build_sample(doc: YamlDocument, path: PathKey, d: Mapping[str, Any]) -> Sample:
    return Sample(
        args=tuple(_build_arg(a) for a in d.get("args", [])),
        kwargs=frozen_map({k: _build_arg(v) for k, v in (d.get("kwargs") or {}).items()}),
        loc=SourceLoc(doc.file, doc.line_of(path)),
        note=d.get("note", ""),
    )


def _tolerances(d: Mapping[str, Any] | None) -> Mapping[str, Tolerance]:
    return frozen_map({k: Tolerance(float(v["atol"]), float(v["rtol"])) for k, v in (d or {}).items()})


def _build_ops(doc: YamlDocument, app: Applicability) -> dict[str, OpInfo]:
    out = {}
    for op, d in doc.data["ops"].items():
        if not app.admits(d):
            continue
        base: PathKey = ("ops", op)
        eps = []
        for i, ep in enumerate(d.get("entry_points", [])):
            if isinstance(ep, str):
                eps.append(EntryPoint(ep))
            else:
                eps.append(EntryPoint(ep["call"], _build_sample(doc, (*base, "entry_points", i), ep)))
        out[op] = OpInfo(
            op=op,
            samples=tuple(_build_sample(doc, (*base, "samples", i), s) for i, s in enumerate(d["samples"])),
            entry_points=tuple(eps),
            loc=SourceLoc(doc.file, doc.line_of(base)),
            tolerance=_tolerances(d.get("tolerance")),
            append_dtype_target=d.get("append_dtype_target"),
            nondeterministic=bool(d.get("nondeterministic", False)),
            fake_kernel=bool(d.get("fake_kernel", True)),
            needs_device=bool(d.get("needs_device", False)),
            intercept_only=d.get("intercept_only", ""),
            functorch_gaps=frozen_map(d.get("functorch_gaps", {})),
            scratch_outputs=tuple(d.get("scratch_outputs", [])),
            kernel_gaps=tuple(
                KernelGap(g["device"], g["dtype"], g["reason"]) for g in d.get("kernel_gaps", [])
            ),
            note=d.get("note", ""),
        )
    return out


def _known_bugs(doc: YamlDocument, version: str) -> tuple[KnownBug, ...]:
    return tuple(
        KnownBug(
            id=b["id"],
            check=b["check"],
            observed=(b["observed"],) if isinstance(b["observed"], str) else tuple(b["observed"]),
            reason=b["reason"],
            source=b["source"],
            torch_versions=b["torch"],
            loc=SourceLoc(doc.file, doc.line_of(("known_bugs", i))),
            devices=tuple(b.get("devices", [])),
        )
        for i, b in enumerate(doc.data.get("known_bugs", []))
        if specifier_contains(b["torch"], version)
    )


def _build_rules(doc: YamlDocument, version: str) -> Rules:
    d = doc.data
    el, ca, cx = d["eligibility"], d["cache"], d["context"]
    return Rules(
        eligibility=Eligibility(el["floating_only"], tuple(el["never_cast"]), el["same_device_only"]),
        out_of_place_only=d["out_of_place_only"],
        cache=CacheRule(
            tuple(ca["source_dtypes"]),
            ca["leaf_only"],
            ca["requires_grad_only"],
            tuple(Policy(p) for p in ca["policies"]),
            ca["cleared_at"],
            ca["exclude_views"],
            ca["key"],
            ca["in_inference_mode"],
        ),
        context=ContextRules(**cx),
        default_tolerance=_tolerances(d["default_tolerance"]),
        loc=SourceLoc(doc.file, 1),
        mandatory_core=tuple(d.get("mandatory_core", [])),
        unlisted_watchlist=tuple(d.get("unlisted_watchlist", [])),
        custom_ops=CustomOpRules(tuple((d.get("custom_ops") or {}).get("register_autocast_devices", ()))),
        promote=PromoteRule(
            d["promote"]["foreign_float"]["action"], d["promote"]["foreign_float"]["message"]
        ),
        known_bugs=_known_bugs(doc, version),
    )


def _divergence(d: Mapping[str, Any]) -> Divergence:
    return Divergence(
        d["op"], d.get("dtype"), d["observed"], d["reason"], d.get("inputs", "float32"), d.get("condition")
    )


def _build_jit(
    doc: YamlDocument, app: Applicability
) -> tuple[list[JitLimitation], dict[str, list[Divergence]]]:
    version = app.version
    lims = []
    for i, d in enumerate(doc.data.get("limitations", [])):
        if not specifier_contains(d["torch"], version):
            continue
        lims.append(
            JitLimitation(
                id=d["id"],
                summary=d["summary"],
                mode=d["mode"],
                expect=d["expect"],
                torch_versions=d["torch"],
                source=d["source"],
                loc=SourceLoc(doc.file, doc.line_of(("limitations", i))),
                message=d.get("message"),
                documented=d.get("documented"),
                differs=tuple(_divergence(x) for x in d.get("differs", [])),
                devices=tuple(d.get("devices", [])),
                later_calls=d.get("later_calls"),
                observes=tuple(d.get("observes", [])),
            )
        )
    divs = {
        m: [_divergence(x) for x in xs if app.admits(x)]
        for m, xs in (doc.data.get("mode_divergences") or {}).items()
    }
    return lims, divs


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


@dataclass
class _Collected:
    devices: dict[str, list[YamlDocument]] = field(default_factory=dict)
    rules: list[YamlDocument] = field(default_factory=list)
    ops: list[YamlDocument] = field(default_factory=list)
    jit: list[YamlDocument] = field(default_factory=list)


def _read_all(files: Sequence[Path], probs: list[SpecProblem]) -> list[YamlDocument]:
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
        sp = schema_problems(doc)
        if sp:
            probs.extend(sp)
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


def load_spec(
    paths: Sequence[Path] | None = None,
    torch_version: str | None = None,
    check_registry: bool = True,
    nearest: bool = False,
    build: frozenset[str] | None = None,
    categories: Collection[str] | None = None,
) -> Spec:
    """Load and check a spec.

    ``paths``: spec files or directories; None means the bundled spec. User files
    that hold no ``rules`` file are overlaid on the bundled spec: a vendor's device
    file can ``extends: cuda`` without copying anything. A device defined in the
    user's files replaces the bundled one of the same name.

    ``torch_version``: the release to describe (default: the installed one). With
    ``nearest`` and no ``torch_version``, a torch that no device file covers is read
    as the nearest covered release (:attr:`Spec.installed_torch` keeps the real one).
    ``build``: the build features ``build:`` conditions are judged by (default: the
    installed torch's, :func:`~reference_impl.torch_registry.build_features`).
    ``categories``: the test categories that may be mandatory (the suite's registry);
    a ``mandatory_core`` name outside them is a problem at its line.
    """
    installed = installed_torch_version()
    version = torch_version or installed
    files, probs = _files_for(paths)
    docs = _read_all(files, probs)
    own = {id(d) for d in docs}  # the caller's files (the rest: the bundled spec beneath them)
    if paths and docs and not any(d.data["kind"] == "rules" for d in docs):
        user_devices = {d.data.get("device") for d in docs if d.data["kind"] == "device"}
        base_docs = _read_all(spec_files([bundled_spec_dir()]), probs)
        base_docs = [
            d for d in base_docs if not (d.data["kind"] == "device" and d.data["device"] in user_devices)
        ]
        docs = base_docs + docs
        files = [Path(d.file) for d in docs]
    if probs:
        raise SpecError(probs)

    col = _Collected()
    for d in docs:
        kind = d.data["kind"]
        if kind == "device":
            col.devices.setdefault(d.data["device"], []).append(d)
        else:
            getattr(col, kind).append(d)

    all_ranges = sorted({d.data["torch"] for ds in col.devices.values() for d in ds})
    if nearest and torch_version is None and not any(specifier_contains(r, version) for r in all_ranges):
        version = nearest_covered_version(all_ranges, version) or version
    app = Applicability(version, build_features() if build is None else build)

    raw: dict[str, _RawDevice] = {}
    out_of_range: dict[str, list[str]] = {}
    for name, ds in col.devices.items():
        matching = [d for d in ds if specifier_contains(d.data["torch"], version)]
        if len(matching) > 1:
            for d in matching[1:]:
                probs.append(
                    SpecProblem(
                        d.file,
                        d.line_of(("torch",)),
                        f"two files describe device {name!r} for torch {version} "
                        f"(also {matching[0].file}); make their 'torch' ranges disjoint",
                    )
                )
        if not matching:
            out_of_range[name] = [d.data["torch"] for d in ds]
            continue
        raw[name] = _build_raw_device(matching[0], app, probs)

    if col.devices and not raw:
        ranges = sorted({r for rs in out_of_range.values() for r in rs})
        probs.append(
            SpecProblem(
                files[0].parent.as_posix() if files else "spec",
                0,
                f"no device spec describes torch {version} (the files cover {', '.join(ranges)}); "
                + (
                    f"the nearest covered version is {near}: pass --torch-version {near} to use it, "
                    if (near := nearest_covered_version(ranges, version))
                    else "pass --torch-version to pick one, "
                )
                + "or probe this torch with 'autocast-spec probe --device D' to write one",
            )
        )
    devices = _resolve_devices(raw, probs)

    if len(col.rules) != 1:
        probs.append(
            SpecProblem(
                col.rules[1].file if len(col.rules) > 1 else "spec",
                0,
                "a spec needs exactly one 'kind: rules' file"
                + (f" (found {len(col.rules)})" if col.rules else " (found none)"),
            )
        )
    rules = _build_rules(col.rules[0], version) if col.rules else None

    ops: dict[str, OpInfo] = {}
    for d in col.ops:
        for op, info in _build_ops(d, app).items():
            if op in ops:
                probs.append(SpecProblem(d.file, info.loc.line, f"{op} already has samples at {ops[op].loc}"))
                continue
            ops[op] = info

    limitations: list[JitLimitation] = []
    divs: dict[str, list[Divergence]] = {}
    for d in col.jit:
        lims, dv = _build_jit(d, app)
        limitations.extend(lims)
        for m, xs in dv.items():
            divs.setdefault(m, []).extend(xs)

    # op names are checked against the installed registry only when describing the installed
    # release: older releases had operators the installed torch no longer has. The shared files
    # (op catalog, rules) are checked only where their own device files claim this release: read
    # beside a user's file for a newer torch, their ops the torch lacks are 'not in this torch'.
    if check_registry and same_release(version, installed):
        claimed = any(
            d.data["kind"] == "device" and specifier_contains(d.data["torch"], version)
            for d in docs
            if id(d) not in own or not paths
        ) or any(d.data["kind"] == "rules" and id(d) in own for d in docs)
        probs.extend(
            checks.registry_problems(devices.values(), ops.values() if claimed else (), raw_files=docs)
        )
        if col.rules and claimed:
            probs.extend(checks.rules_registry_problems(col.rules[0]))
    probs.extend(checks.limitation_problems(limitations))
    if categories is not None and col.rules:
        probs.extend(checks.mandatory_core_problems(col.rules[0], categories))
    if probs or rules is None:
        raise SpecError(probs)

    return Spec(
        torch_version=version,
        installed_torch=installed,
        devices=frozen_map(dict(sorted(devices.items()))),
        rules=rules,
        ops=frozen_map(dict(sorted(ops.items()))),
        files=tuple(d.file for d in docs),
        content_hash=content_hash(Path(f) for f in files),
        limitations=tuple(limitations),
        mode_divergences=frozen_map({m: ModeDivergences(m, tuple(xs)) for m, xs in sorted(divs.items())}),
    )


def device_torch_ranges(paths: Sequence[Path] | None = None) -> list[str]:
    """The ``torch:`` ranges of the device files in ``paths`` (default: the bundled spec)."""
    files, _ = _files_for(paths)
    docs = _read_all(files, [])
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


def with_devices(spec: Spec, devices: Mapping[str, DeviceSpec]) -> Spec:
    """A copy of ``spec`` with other device specs (used by probe/diff)."""
    return replace(spec, devices=frozen_map(dict(sorted(devices.items()))))

"""The shared spec files -> model pieces: the op catalog, the rules, the JIT data.

Each builder takes a schema-valid document and the release (and build) it is read
for; entries outside that release are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .catalog import (
    Arg,
    DtypeArg,
    EntryPoint,
    FunctorchGap,
    KernelGap,
    ListArg,
    Literal,
    OpInfo,
    Sample,
    TensorArg,
)
from .common import SourceLoc, Tolerance, cited, frozen_map
from .known_bugs import KnownBug
from .model import (
    CacheRule,
    ContextRules,
    CustomOpRules,
    Divergence,
    Eligibility,
    JitLimitation,
    Policy,
    PromoteRule,
    Rules,
    ValueDivergence,
)
from .surface import (
    ArgumentCheck,
    CallForm,
    EntryPointInfo,
    NotListed,
    Parameter,
    ParameterKind,
    Role,
    Surface,
    UnderCompile,
)
from .versions import Applicability, specifier_contains, version_in
from .yaml_source import PathKey, YamlDocument


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
                constant=bool(value.get("constant", False)),
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


def _functorch_gaps(gaps: Mapping[str, Any], app: Applicability) -> tuple[FunctorchGap, ...]:
    """The gaps of this torch release (a transform holds one gap, or a list of them by device or
    release), each with why and its source."""
    return tuple(
        FunctorchGap(k, f"{g['reason']} ({cited(g)})", tuple(g.get("devices", ())))
        for k, v in gaps.items()
        for g in (v if isinstance(v, list) else [v])
        if app.admits(g)
    )


def build_ops(doc: YamlDocument, app: Applicability) -> dict[str, OpInfo]:
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
            functorch_gaps=_functorch_gaps(d.get("functorch_gaps", {}), app),
            scratch_outputs=tuple(d.get("scratch_outputs", [])),
            kernel_gaps=tuple(
                KernelGap(g["device"], g["dtype"], g["reason"], cited(g))
                for g in d.get("kernel_gaps", [])
                if app.admits(g)
            ),
            no_derivative=d.get("no_derivative", ""),
            note=d.get("note", ""),
        )
    return out


def known_bugs_of(doc: YamlDocument, version: str, default_range: str = "") -> tuple[KnownBug, ...]:
    """The ``known_bugs`` of ``doc`` that hold for ``version`` (an entry without ``torch``:
    ``default_range``, a vendor device file's own range)."""
    out = []
    for i, b in enumerate(doc.data.get("known_bugs") or []):
        torch_range = b.get("torch", default_range)
        if not specifier_contains(torch_range, version):
            continue
        out.append(
            KnownBug(
                id=b["id"],
                check=b["check"],
                observed=(b["observed"],) if isinstance(b["observed"], str) else tuple(b["observed"]),
                reason=b["reason"],
                source=b["source"],
                torch_versions=torch_range,
                loc=SourceLoc(doc.file, doc.line_of(("known_bugs", i))),
                devices=tuple(b.get("devices", [])),
                seen_on=b.get("seen_on", ""),
                ops=tuple(b.get("ops", [])),
                features=frozenset(b.get("features", [])),
                reproduction=b.get("reproduction", ""),
            )
        )
    return tuple(out)


def build_rules(doc: YamlDocument, version: str) -> Rules:
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
        known_bugs=known_bugs_of(doc, version),
    )


def _divergence(d: Mapping[str, Any], loc: SourceLoc) -> Divergence:
    return Divergence(
        d["op"],
        d.get("dtype"),
        d["observed"],
        d["reason"],
        d.get("inputs", "float32"),
        d.get("condition"),
        cited(d) if "source" in d else "",
        d.get("backend"),
        loc,
    )


def build_jit(
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
                source=cited(d),
                loc=SourceLoc(doc.file, doc.line_of(("limitations", i))),
                message=d.get("message"),
                documented=d.get("documented"),
                differs=tuple(
                    _divergence(x, SourceLoc(doc.file, doc.line_of(("limitations", i, "differs", j))))
                    for j, x in enumerate(d.get("differs", []))
                ),
                devices=tuple(d.get("devices", [])),
                later_calls=d.get("later_calls"),
                observes=tuple(d.get("observes", [])),
            )
        )
    divs = {
        m: [
            _divergence(x, SourceLoc(doc.file, doc.line_of(("mode_divergences", m, j))))
            for j, x in enumerate(xs)
            if app.admits(x)
        ]
        for m, xs in (doc.data.get("mode_divergences") or {}).items()
    }
    return lims, divs


def build_value_divergences(doc: YamlDocument, app: Applicability) -> list[ValueDivergence]:
    """A jit document's ``value_divergences`` that apply to the release read."""
    return [
        ValueDivergence(
            op=d.get("op"),
            region=d.get("region"),
            mode=d["mode"],
            max_error=float(d["max_error"]),
            reason=d["reason"],
            host=d["condition"]["host"],
            config=d["condition"]["config"],
            source=d["source"],
            loc=SourceLoc(doc.file, doc.line_of(("value_divergences", i))),
            dtype=d.get("dtype"),
            inputs=d.get("inputs"),
            backend=d.get("backend"),
            seen_on=d.get("seen_on"),
        )
        for i, d in enumerate(doc.data.get("value_divergences") or [])
        if app.admits(d)
    ]


def _under_compile(d: Mapping[str, Any] | None, app: Applicability) -> UnderCompile | None:
    if d is None or not app.admits(d):
        return None
    return UnderCompile(d["outcome"], d["message"], cited(d), d.get("error"))


def _parameter(p: str | Mapping[str, Any]) -> Parameter:
    if isinstance(p, str):
        return Parameter(p)
    kind = ParameterKind(p.get("kind", "positional_or_keyword"))
    return Parameter(p["name"], kind, p.get("required", True))


def _parameters(e: Mapping[str, Any], roles: Mapping[str, Any]) -> tuple[Parameter, ...]:
    """An entry point's parameters: its own ``parameters``, a region's ``positional``, else its
    role's (``kind``; ``bound_kind`` for an entry bound to a device, which takes no device_type)."""
    if "parameters" in e:
        return tuple(_parameter(p) for p in e["parameters"])
    if "positional" in e:
        return tuple(Parameter(p, required=p == "device_type") for p in e["positional"])
    role = roles.get(e["role"]) or {}
    bound = "device" in e
    own = role.get("kind", "positional_or_keyword")
    kind = ParameterKind(role.get("bound_kind", own) if bound else own)
    return tuple(Parameter(p, kind) for p in role.get("parameters", ()) if not (bound and p == "device_type"))


def _call_forms(doc: YamlDocument, app: Applicability) -> tuple[CallForm, ...]:
    return tuple(
        CallForm(
            form=d["form"],
            outcome=d["outcome"],
            cited=cited(d),
            loc=SourceLoc(doc.file, doc.line_of(("call_forms", i))),
            roles=tuple(Role(r) for r in d.get("roles", ("region",))),
            bound=d.get("bound"),
            error=d.get("error"),
            message=d.get("message"),
            compiled=_under_compile(d.get("compiled"), app),
        )
        for i, d in enumerate(doc.data.get("call_forms") or ())
        if app.admits(d)
    )


def build_surface(doc: YamlDocument, app: Applicability) -> Surface:
    """The Python surface of the release read (``kind: surface``): an entry point is
    ``deprecated`` from the release its ``deprecated`` names on."""
    roles = doc.data.get("roles") or {}
    return Surface(
        entry_points=tuple(
            EntryPointInfo(
                name=e["name"],
                role=Role(e["role"]),
                alias_of=e.get("alias_of"),
                device=e.get("device"),
                positional=tuple(e.get("positional", ())),
                deprecated="deprecated" in e and version_in(app.version, e["deprecated"], None),
                deprecated_in=e.get("deprecated"),
                warning=e.get("warning"),
                compiled=_under_compile(e.get("compiled"), app),
                parameters=_parameters(e, roles),
            )
            for e in doc.data["entry_points"]
            if app.admits(e)
        ),
        validation=tuple(
            ArgumentCheck(
                v["argument"],
                v["value"],
                v["outcome"],
                v.get("error"),
                v.get("message"),
                v["source"],
                _under_compile(v.get("compiled"), app),
                tuple(Role(r) for r in v.get("roles", ("region",))),
                v.get("bound"),
            )
            for v in doc.data["validation"]
            if app.admits(v)
        ),
        not_listed=tuple(NotListed(n["name"], n["reason"]) for n in doc.data.get("not_listed") or ()),
        call_forms=_call_forms(doc, app),
    )

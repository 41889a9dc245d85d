"""spec/python_surface.yaml's parameters of each entry point and its call forms: the model reads them as
written, and each form reaches the entry points it names."""

from __future__ import annotations

from autocast_spec.builders import build_surface
from autocast_spec.model import Spec
from autocast_spec.surface import ParameterKind, Role
from autocast_spec.versions import Applicability
from autocast_spec.yaml_source import YamlDocument


def _surface_doc(data: dict[str, object]) -> YamlDocument:
    return YamlDocument("python_surface.yaml", {"kind": "surface", "validation": [], **data}, {})


def test_parameters_come_from_the_entry_the_region_or_the_role() -> None:
    """An entry point's own parameters, a region's positional ones (only device_type required),
    else its role's, without device_type and of the role's bound_kind when bound to a device."""
    doc = _surface_doc(
        {
            "roles": {
                "enabled_setter": {"parameters": ["device_type", "enabled"], "bound_kind": "positional_only"}
            },
            "entry_points": [
                {
                    "name": "torch.a",
                    "role": "region",
                    "positional": ["device_type", "dtype"],
                    "source": "none",
                },
                {"name": "torch.b", "role": "enabled_setter", "source": "none"},
                {"name": "torch.c", "role": "enabled_setter", "device": "cpu", "source": "none"},
                {
                    "name": "torch.d",
                    "role": "decorator",
                    "parameters": [
                        {"name": "fwd", "required": False},
                        {"name": "device_type", "kind": "keyword_only"},
                    ],
                    "source": "none",
                },
            ],
        }
    )
    a, b, c, d = build_surface(doc, Applicability("2.13.0", frozenset())).entry_points
    assert [(p.name, p.required) for p in a.parameters] == [("device_type", True), ("dtype", False)]
    assert [(p.name, p.kind) for p in b.parameters] == [
        ("device_type", ParameterKind.POSITIONAL_OR_KEYWORD),
        ("enabled", ParameterKind.POSITIONAL_OR_KEYWORD),
    ]
    assert [(p.name, p.kind) for p in c.parameters] == [("enabled", ParameterKind.POSITIONAL_ONLY)]
    assert [(p.name, p.kind, p.required) for p in d.parameters] == [
        ("fwd", ParameterKind.POSITIONAL_OR_KEYWORD, False),
        ("device_type", ParameterKind.KEYWORD_ONLY, True),
    ]


def test_a_form_selects_by_role_binding_and_parameters(spec: Spec) -> None:
    """The bundled spec's forms reach the entry points they name, and only those."""
    surface = spec.surface
    by_name = {e.name: e for e in surface.entry_points}

    def selected(form: str, name: str) -> bool:
        return any(c.form == form and c.selects(by_name[name]) for c in surface.call_forms)

    assert selected("keyword", "torch.set_autocast_enabled")
    assert not selected("keyword", "torch.set_autocast_cpu_enabled")  # a C function: no keywords
    assert selected("keyword_for_positional_only", "torch.set_autocast_cpu_enabled")
    assert selected("missing_argument", "torch.autocast") and not selected(
        "missing_argument", "torch.cpu.amp.autocast"
    )
    assert not selected("missing_argument", "torch.is_autocast_enabled")  # the legacy query: context's
    assert selected("swapped_arguments", "torch.library.register_autocast")
    assert selected("recursive", "torch.cpu.amp.autocast") and not selected(
        "recursive", "torch.get_autocast_dtype"
    )
    regions = [e for e in surface.entry_points if e.role is Role.REGION]
    assert all(sum(c.selects(e) for c in surface.call_forms if c.form == "subclass") == 1 for e in regions)

"""spec/python_surface.yaml's call forms and their category: the model reads them as written, and
each check fails under a planted bug of its form family.

Each plant is a ``-p`` plugin that replaces one public entry point (or, for compile, one piece of
Dynamo) the way a bug would: a setter that ignores keyword arguments; an availability query
that swallows an extra positional argument; a getter that accepts a ``torch.device``; a region
whose ``__enter__`` returns None and that can be entered only once; a decorator that enters the
region only for one-argument calls (a method's ``(self, x)`` runs outside it) and wraps what is
not callable (what torch did before pytorch#172178); and, compiled, a region object captured from
outside the compiled frame entered disabled. Every other call-form test still passes, or is a
bug of torch that spec/rules.yaml declares.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from helpers.suite_runs import run_planted, skip_reasons, summary

from autocast_spec.builders import build_surface
from autocast_spec.model import Spec
from autocast_spec.surface import ParameterKind, Role
from autocast_spec.versions import Applicability
from autocast_spec.yaml_source import YamlDocument

KEYWORDS_IGNORED = """
_set_dtype = torch.set_autocast_dtype


def set_autocast_dtype(*args, **kwargs):
    if kwargs:  # planted: keyword arguments are accepted and ignored
        return None
    return _set_dtype(*args)


torch.set_autocast_dtype = set_autocast_dtype
"""

EXTRA_SWALLOWED = """
_available = torch.amp.is_autocast_available
torch.amp.is_autocast_available = lambda device_type, *extra: _available(device_type)  # planted
"""

DEVICE_ACCEPTED = """
_get_dtype = torch.get_autocast_dtype


def get_autocast_dtype(device_type):
    if isinstance(device_type, torch.device):  # planted: a torch.device is taken for its type
        device_type = device_type.type
    return _get_dtype(device_type)


torch.get_autocast_dtype = get_autocast_dtype
"""

SINGLE_USE_REGION = """
_enter = torch.amp.autocast_mode.autocast.__enter__


def __enter__(self):
    if getattr(self, "_planted_used", False):  # planted: an autocast object can be entered once
        raise RuntimeError("this autocast object was entered before")
    self._planted_used = True
    _enter(self)  # planted: 'with ... as ac' binds None


torch.amp.autocast_mode.autocast.__enter__ = __enter__
"""

ONE_ARGUMENT_DECORATOR = """
import functools


def __call__(self, func):
    @functools.wraps(func)  # planted: no check that func is callable (before pytorch#172178)
    def wrapper(*args, **kwargs):
        if len(args) != 1:  # planted: a method's (self, x) call runs outside the region
            return func(*args, **kwargs)
        with self:
            return func(*args, **kwargs)

    return wrapper


torch.amp.autocast_mode.autocast.__call__ = __call__
"""

PLANTS = (KEYWORDS_IGNORED, EXTRA_SWALLOWED, DEVICE_ACCEPTED, SINGLE_USE_REGION, ONE_ARGUMENT_DECORATOR)
# what the plants break: the tests that must fail, and no other
BROKEN = (
    *(f"arguments-torch.set_autocast_dtype-{f}" for f in ("keyword]", "unknown_keyword", "missing_argument")),
    "arguments-torch.set_autocast_dtype-repeated_argument",
    "arguments-torch.amp.is_autocast_available-extra_positional",
    "value-torch.get_autocast_dtype-device_type=torch_device",
    *(
        f"region-{e}-{f}"
        for e in ("torch.autocast", "torch.amp.autocast", "torch.cpu.amp.autocast")
        for f in ("with_as", "reused", "reentered")
    ),
    *(
        f"decorator-{e}-{f}"
        for e in ("torch.autocast", "torch.amp.autocast", "torch.cpu.amp.autocast")
        for f in ("method", "classmethod", "recursive", "tensor", "none", "classmethod_object")
    ),
    "decorator-torch.cpu.amp.autocast-bare",  # its region is then called on the tensor: wrapped
)


def _rest_passes(tmp_path: Path, plugin: str, got: dict[str, str], failed: set[str]) -> None:
    """Every test but the failed ones passed or is a known bug of torch (JUnit: skipped)."""
    why = skip_reasons(tmp_path / f"{plugin}.xml")
    rest = {k: v for k, v in got.items() if k not in failed and (v != "skipped" or "known bug" not in why[k])}
    assert set(rest.values()) == {"passed"}, rest


def test_planted_call_form_bugs_fail_their_checks(tmp_path: Path) -> None:
    """All eager plants in one run: each breaks its forms' tests and no other."""
    p, got = run_planted(
        tmp_path,
        "planted_call_forms",
        "import torch\n" + "\n".join(textwrap.dedent(p) for p in PLANTS),
        *("--backend", "cpu", "--dtype", "bfloat16", "-m", "call_forms"),
    )
    assert got, summary(p)
    failed = {k for k, v in got.items() if v == "failure"}
    for broken in BROKEN:
        assert any(broken in k for k in failed), (broken, summary(p))
    assert all(any(b in k for b in BROKEN) for k in failed), sorted(failed)
    _rest_passes(tmp_path, "planted_call_forms", got, failed)


CAPTURED_DISABLED = """
import torch
from torch._dynamo.variables.ctx_manager import AutocastModeVariable

_init = AutocastModeVariable.__init__


def __init__(self, target_values, initial_values=None, **kwargs):
    if kwargs.get("source") is not None:  # planted: a region captured from outside the frame is off
        target_values = [*target_values[:2], False, *target_values[3:]]
    _init(self, target_values, initial_values, **kwargs)


AutocastModeVariable.__init__ = __init__
"""


def test_a_compiled_plant_fails_the_compiled_forms(tmp_path: Path) -> None:
    """Dynamo entering a captured region object disabled: the compiled decorator and stored-object
    forms fail; a region written in the frame (with_as: still its declared bug) and eager do not."""
    picked = (
        "decorator-torch.autocast-function or region-torch.autocast-reused or region-torch.autocast-with_as"
    )
    p, got = run_planted(
        tmp_path,
        "planted_compiled_forms",
        CAPTURED_DISABLED,
        *("--backend", "cpu", "--dtype", "bfloat16", "--mode", "compile", "-m", "call_forms", "-k", picked),
    )
    failed = {k for k, v in got.items() if v == "failure"}
    assert failed == {
        "conformance.test_call_forms::test_call_forms[cpu-bfloat16-decorator-torch.autocast-function-compile]",
        "conformance.test_call_forms::test_call_forms[cpu-bfloat16-region-torch.autocast-reused-compile]",
    }, summary(p)
    _rest_passes(tmp_path, "planted_compiled_forms", got, failed)


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

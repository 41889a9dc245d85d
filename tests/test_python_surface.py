"""spec/python_surface.yaml and its category: the checks fail under planted surface bugs.

Each plant is a ``-p`` plugin that replaces one public entry point the way a real bug did:
the legacy alias ignoring ``enabled`` (PR #101052 fixed a positional ``enabled`` dropped under
compile), and a legacy getter returning something other than the canonical dtype object
(pytorch#65786); a current entry point that warns as deprecated, and a deprecated one (another
device's legacy getter) that stopped warning. The planted alias also
drops the alias's deprecation warning. Two compiler plants break only what a compiled function
sees: Dynamo folding ``torch.get_autocast_dtype`` to the default dtype, and a compiled region
that accepts the ``torch.device`` eager rejects.
"""

from __future__ import annotations

import importlib
import inspect
import textwrap
from dataclasses import replace
from pathlib import Path

import torch
from helpers.suite_runs import run_planted, skip_reasons, summary

from autocast_spec.builders import build_surface
from autocast_spec.model import Spec
from autocast_spec.surface import Role, Surface
from autocast_spec.versions import Applicability
from autocast_spec.yaml_source import YamlDocument
from reference_impl.harness.samples import resolve_entry_point

WRONG_ALIAS = """
import torch

_real = torch.cpu.amp.autocast


class autocast(torch.amp.autocast):
    def __init__(self, enabled=True, dtype=torch.bfloat16, cache_enabled=True):
        # planted: enabled is dropped (the region is always on)
        super().__init__("cpu", dtype=dtype, enabled=True, cache_enabled=cache_enabled)


torch.cpu.amp.autocast = autocast
"""

WRONG_GETTER = """
import torch

_real = torch.get_autocast_cpu_dtype
torch.get_autocast_cpu_dtype = lambda: str(_real())  # planted: a name, not the dtype object
"""

WRONG_DEPRECATION = """
import warnings

_custom_bwd = torch.amp.custom_bwd


def custom_bwd(*args, **kwargs):
    warnings.warn("torch.amp.custom_bwd is deprecated", FutureWarning)  # planted
    return _custom_bwd(*args, **kwargs)


torch.amp.custom_bwd = custom_bwd
"""

WRONG_COMPILED_GETTER = """
from torch._dynamo.variables.base import VariableTracker
from torch._dynamo.variables.torch import TorchInGraphFunctionVariable

_call_function = TorchInGraphFunctionVariable.call_function


def call_function(self, tx, args, kwargs):
    if self.value is torch.get_autocast_dtype:  # planted: folded to the default dtype, not the region's
        return VariableTracker.build(tx, torch.get_default_dtype())
    return _call_function(self, tx, args, kwargs)


TorchInGraphFunctionVariable.call_function = call_function
"""

WRONG_COMPILED_VALIDATION = """
_enter_autocast = torch.amp._enter_autocast  # what a compiled region calls


def enter_autocast(*args):
    if isinstance(args[0], torch.device):  # planted: a compiled region accepts a torch.device
        args = (args[0].type, *args[1:])
    return _enter_autocast(*args)


torch.amp._enter_autocast = enter_autocast
"""

SILENT_LEGACY_GETTER = """
torch.get_autocast_xla_dtype = lambda: torch.get_autocast_dtype("xla")  # planted: no longer warns
"""

PLANTS = (
    WRONG_ALIAS,
    WRONG_GETTER,
    WRONG_DEPRECATION,
    WRONG_COMPILED_GETTER,
    WRONG_COMPILED_VALIDATION,
    SILENT_LEGACY_GETTER,
)
# what each plant breaks: the checks that must fail, nothing else
BROKEN = (
    "alias-torch.cpu.amp.autocast-",  # every form and run: enabled is dropped
    "getter-torch.get_autocast_cpu_dtype",  # eager, and compiled (without fullgraph: a str)
    "getter-torch.get_autocast_dtype-compile",  # the compiled getter ignores the region
    "argument-device_type=torch_device-compile",  # the compiled region takes a torch.device
    "entry_point-torch.get_autocast_xla_dtype",  # another device's legacy getter, checked on cpu
    "entry_point-torch.amp.custom_bwd",  # a current entry point warns as deprecated
    "entry_point-torch.cpu.amp.autocast",  # the planted alias no longer warns as deprecated
)


def test_planted_surface_bugs_fail_their_checks(tmp_path: Path) -> None:
    """All plants in one run (one subprocess): each breaks its checks and no other."""
    p, got = run_planted(
        tmp_path,
        "planted_surface",
        "\n".join(textwrap.dedent(p) for p in PLANTS),
        *("--backend", "cpu", "--dtype", "bfloat16", "-m", "python_surface"),
    )
    assert got, summary(p)
    failed = {k for k, v in got.items() if v == "failure"}
    for broken in BROKEN:
        assert any(broken in k for k in failed), (broken, summary(p))
    for compiled in (
        "alias-torch.cpu.amp.autocast-positional-disabled-compile",
        "getter-torch.get_autocast_cpu_dtype-compile",
    ):
        assert any(compiled in k for k in failed), (compiled, failed)
    # eager still passes where only the compiler is planted
    for eager in ("getter-torch.get_autocast_dtype]", "argument-device_type=torch_device]"):
        assert not any(eager in k for k in failed), (eager, failed)
    assert all(any(b in k for b in BROKEN) for k in failed), failed
    why = skip_reasons(tmp_path / "planted_surface.xml")  # the rest pass, or are torch's declared bugs
    rest = {k: v for k, v in got.items() if k not in failed and (v != "skipped" or "known bug" not in why[k])}
    assert set(rest.values()) == {"passed"}, rest


def test_the_surface_section_lists_the_issue_entry_points(spec: Spec) -> None:
    names = {e.name for e in spec.surface.entry_points}
    needed = {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.cpu.amp.autocast",
        "torch.cuda.amp.autocast",
        "torch.is_autocast_enabled",
        "torch.get_autocast_dtype",
        "torch.set_autocast_dtype",
        "torch.get_autocast_cpu_dtype",
        "torch.amp.is_autocast_available",
        "torch.clear_autocast_cache",
        "torch.amp.custom_fwd",
        "torch.amp.custom_bwd",
    }
    assert needed <= names, needed - names
    assert {e.name for e in spec.surface.entry_points if e.deprecated} >= {"torch.cpu.amp.autocast"}


# The modules whose public names are autocast's Python surface (names with "autocast" only,
# where the module holds much else).
SURFACE_MODULES = {
    "torch": "autocast",
    "torch.amp": "",
    "torch.amp.autocast_mode": "",
    "torch.cpu.amp": "",
    "torch.cpu.amp.autocast_mode": "",
    "torch.cuda.amp": "",
    "torch.cuda.amp.autocast_mode": "",
    "torch.library": "autocast",
}


def _public_names(module: str, containing: str) -> dict[str, object]:
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    objects = {f"{module}.{n}": getattr(mod, n) for n in names if containing in n}
    return {n: o for n, o in objects.items() if not inspect.ismodule(o)}


def unlisted(surface: Surface) -> tuple[list[str], list[str]]:
    """This torch's public autocast names that are neither an entry point, the same object as
    one (an implementation module's name for it), nor not_listed; and the not_listed names
    this torch does not have."""
    public = {n: o for m, c in SURFACE_MODULES.items() for n, o in _public_names(m, c).items()}
    listed = [resolve_entry_point(e.name) for e in surface.entry_points]
    names = {e.name for e in surface.entry_points} | {n.name for n in surface.not_listed}
    missing = [n for n, o in public.items() if n not in names and all(o is not x for x in listed)]
    return missing, [n.name for n in surface.not_listed if n.name not in public]


def test_the_surface_lists_every_public_autocast_name_of_this_torch(spec: Spec) -> None:
    """Every listed entry point resolves in this torch, and nothing public is left out."""
    missing, gone = unlisted(spec.surface)
    assert not missing, (
        f"public autocast names of torch {torch.__version__} not in spec/python_surface.yaml: {missing}"
    )
    assert not gone, f"not_listed names this torch does not have: {gone}"


def test_a_name_left_out_of_the_surface_is_reported(spec: Spec) -> None:
    """Planted: the nesting functions and the cpu getter dropped from the list."""
    dropped = ("torch.autocast_increment_nesting", "torch.get_autocast_cpu_dtype")
    kept = tuple(e for e in spec.surface.entry_points if e.name not in dropped)
    missing, _ = unlisted(replace(spec.surface, entry_points=kept))
    assert set(dropped) <= set(missing), missing


def _surface_doc(entries: list[dict[str, object]], validation: list[dict[str, object]]) -> YamlDocument:
    return YamlDocument(
        "python_surface.yaml", {"kind": "surface", "entry_points": entries, "validation": validation}, {}
    )


def test_since_until_and_deprecated_follow_the_release_read() -> None:
    """Entries outside the release are left out, ``compiled`` too; ``deprecated`` holds from its
    release on (a knob compared with the release, not a flag)."""
    brk = {"outcome": "graph_break", "message": "m", "source": "none", "seen_on": "2.14.0", "since": "2.14"}
    doc = _surface_doc(
        [
            {
                "name": "torch.a",
                "role": "dtype_getter",
                "deprecated": "2.14",
                "warning": "FutureWarning",
                "source": "none",
                "compiled": brk,
            },
            {"name": "torch.b", "role": "dtype_getter", "since": "2.14", "source": "none"},
            {"name": "torch.c", "role": "cache_setter", "until": "2.14", "source": "none"},
        ],
        [
            {
                "argument": "enabled",
                "value": "int",
                "outcome": "raises",
                "error": "TypeError",
                "message": "m",
                "source": "none",
                "until": "2.14",
            }
        ],
    )

    def read(release: str) -> Surface:
        return build_surface(doc, Applicability(release, frozenset()))

    old, new = read("2.13.0"), read("2.14.1")
    assert [(e.name, e.deprecated) for e in old.entry_points] == [("torch.a", False), ("torch.c", False)]
    assert [(e.name, e.deprecated) for e in new.entry_points] == [("torch.a", True), ("torch.b", False)]
    assert old.entry_points[0].compiled is None
    assert new.entry_points[0].compiled is not None and new.entry_points[0].compiled.outcome == "graph_break"
    assert old.entry_points[1].role is Role.CACHE_SETTER
    assert len(old.validation) == 1 and not new.validation

"""spec/python_surface.yaml and its category: the checks fail under planted surface bugs.

Each plant is a ``-p`` plugin that replaces one public entry point the way a real bug did:
the legacy alias ignoring ``enabled`` (PR #101052 fixed a positional ``enabled`` dropped under
compile), and a legacy getter returning something other than the canonical dtype object
(pytorch#65786); and a current entry point that warns as deprecated. The planted alias also
drops the alias's deprecation warning. Two compiler plants break only what a compiled function
sees: Dynamo folding ``torch.get_autocast_dtype`` to the default dtype, and a compiled region
that accepts the ``torch.device`` eager rejects.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from helpers.suite_runs import run_planted, summary

from autocast_spec.model import Spec

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

PLANTS = (WRONG_ALIAS, WRONG_GETTER, WRONG_DEPRECATION, WRONG_COMPILED_GETTER, WRONG_COMPILED_VALIDATION)
# what each plant breaks: the checks that must fail, nothing else
BROKEN = (
    "alias-torch.cpu.amp.autocast-",  # every form and run: enabled is dropped
    "getter-torch.get_autocast_cpu_dtype",  # eager, and compiled (without fullgraph: a str)
    "getter-torch.get_autocast_dtype-compile",  # the compiled getter ignores the region
    "argument-device_type=torch_device-compile",  # the compiled region takes a torch.device
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
    assert {v for k, v in got.items() if k not in failed} == {"passed"}, got


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

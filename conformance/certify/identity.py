"""What a certification certifies: the suite and its tests, the backend, torch and the host.

Test ids are *stable*: relative to the suite package, so expectations globs and
bundles mean the same from a checkout and from a wheel. The environment record
(``environment.json``) names torch's build, the device and the host CPU, without
which two bundles cannot be compared.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import torch

import conformance
from autocast_spec.model import Policy, Spec, VendorRelease
from conformance.kit.case import Case
from conformance.registry import category_names, category_of
from conformance.session import target_of
from reference_impl.harness.devices import device_is_real
from reference_impl.modes.run import DEFAULT_COMPILE_BACKEND, Mode

from .host import host_cpu

SUITE_PACKAGE = "conformance"
DISTRIBUTION = "autocast-conformance"


@dataclass
class CollectedTest:
    id: str
    category: str | None = None
    policy: str | None = None
    op: str | None = None
    dtype: str | None = None
    mode: str = "eager"  # the execution mode it checks (test_modes.py's cases name theirs)


def suite_root() -> Path:
    return Path(conformance.__file__).resolve().parent


def suite_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def option(config: pytest.Config, name: str) -> Any:
    """An option's value, or None where the plugin that adds it is not loaded."""
    try:
        return config.getoption(name)
    except ValueError:
        return None


def backend_of(config: pytest.Config) -> str | None:
    b = option(config, "backend")
    return str(b) if b else None


def run_spec(config: pytest.Config) -> Spec:
    """The spec the suite resolved for this run (the one its tests are generated from)."""
    return target_of(config).spec


def mandatory_core(config: pytest.Config) -> tuple[str, ...]:
    return run_spec(config).rules.mandatory_core


def stable_id(item: pytest.Item) -> str:
    """The node id with its file relative to the suite package (``conformance/test_x.py::...``).

    Independent of the rootdir and of where pytest was started.
    """
    path = Path(str(item.path)).resolve()
    _, sep, rest = item.nodeid.partition("::")
    try:
        rel = path.relative_to(suite_root())
    except ValueError:
        return item.nodeid
    return f"{SUITE_PACKAGE}/{rel.as_posix()}{sep}{rest}"


def case_mode(case: Any) -> str:
    """The execution mode a test checks, as its id names it: the ``mode`` of its case's
    parameters (``compile-<backend>`` for a torch.compile backend other than the default),
    ``eager`` for every other test."""
    mode = getattr(getattr(case, "params", None), "mode", None)
    if not isinstance(mode, Mode):
        return Mode.EAGER.value
    backend = getattr(case.params, "backend", DEFAULT_COMPILE_BACKEND)
    return mode.value if backend == DEFAULT_COMPILE_BACKEND else f"{mode.value}-{backend}"


def collected_test(item: pytest.Item) -> CollectedTest:
    """Category, policy, op and dtype of a test: from its Case parameter, else its markers; its mode."""
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("case") if callspec is not None else None
    mode = case_mode(case)
    names = [m.name for m in item.iter_markers()]
    policy = next((n for n in names if n in {p.value for p in Policy}), None)
    generated = item.get_closest_marker("conformance_cases")  # an empty parameter set keeps its category
    if generated is not None and generated.args:
        names.insert(0, category_of(generated.args[0]).name)
    categories = category_names()
    # A test with no category marker takes its module's name: test_jit_limitations.py -> jit_limitations.
    category = next((n for n in names if n in categories), None) or Path(str(item.path)).stem.removeprefix(
        "test_"
    )
    if isinstance(case, Case):
        return CollectedTest(
            stable_id(item),
            case.category or category,
            case.policy.value if case.policy else policy,
            case.op or None,
            case.dtype_text or None,
            mode,
        )
    return CollectedTest(stable_id(item), category, policy, mode=mode)


def plugin_modules(args: Sequence[str]) -> list[str]:
    """The ``-p`` plugins of an invocation (a vendor's backend loader), ``no:`` ones left out."""
    mods = []
    for i, a in enumerate(args):
        if a == "-p" and i + 1 < len(args):
            mods.append(args[i + 1])
        elif a.startswith("-p") and len(a) > 2:
            mods.append(a[2:])
    return [m for m in mods if not m.startswith("no:")]


def environment(device: str | None, vendor: VendorRelease | None = None) -> dict[str, Any]:
    """Python, OS, torch's version and build, the device, the vendor release the spec names
    (as installed) and the host CPU."""
    env: dict[str, Any] = {
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "os": platform.platform(),
        "machine": platform.machine(),
        "torch": {
            "version": torch.__version__,
            "git_version": getattr(torch.version, "git_version", None),
            "cuda": getattr(torch.version, "cuda", None),
            "hip": getattr(torch.version, "hip", None),
            "debug": bool(getattr(torch.version, "debug", False)),
            "build_config": _safe(lambda: torch.__config__.show()),
        },
        "device": {"type": device},
        "host_cpu": host_cpu(lambda: torch.backends.cpu.get_cpu_capability()),
    }
    if device:
        mod: Any = getattr(torch, device, None)
        info = env["device"]
        # as the suite decides it: a backend with no torch.<device> module (torch_xla) is asked itself
        info["available"] = _safe(lambda: device_is_real(device))
        if info["available"] is True:
            info["count"] = _safe(lambda: int(mod.device_count()))
            info["name"] = _safe(lambda: str(mod.get_device_name(0)))
            info["capability"] = _safe(lambda: list(mod.get_device_capability(0)))
        if device == "cuda":
            info["driver"] = _safe(lambda: torch._C._cuda_getDriverVersion())  # type: ignore[attr-defined]
        info["privateuse1_backend"] = _safe(lambda: torch._C._get_privateuse1_backend_name())
    if vendor is not None:
        env["vendor"] = {
            "package": vendor.package,
            "spec_version": vendor.version,
            "installed": _safe(lambda: metadata.version(vendor.package)),
            "module": vendor.module,
            "environment": {k: os.environ.get(k) for k in vendor.environment},
        }
    return env


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:  # what a backend lacks is reported, never fatal
        return f"unavailable ({type(e).__name__})"

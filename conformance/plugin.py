"""pytest plugin: ``pytest conformance --backend <device>`` (entry point ``pytest11``).

This module registers the command-line options and the markers, validates the
options before collection, and lists the sub-plugins. Sub-plugins add one line
each to ``pytest_plugins``.
"""

from __future__ import annotations

import contextlib

import pytest

from autocast_spec.model import Policy
from conformance.errors import usage_error
from reference_impl.reference_autocast import kernels_installed

from .assertions import set_plugins
from .registry import mandatory_able, markers
from .target import IMPLEMENTATIONS, Options, Target, TargetError, resolve_target

pytest_plugins = [
    "conformance.suite",
    "conformance.certify.plugin",
    "conformance.modes",
]

TARGET_KEY = pytest.StashKey[Target]()
# Holds the reference kernels installed for the run under --implementation reference.
INSTALLED_KEY = pytest.StashKey[contextlib.ExitStack]()

# The markers come from the category registry (conformance.registry).
CATEGORY_MARKERS = markers()
# one per policy (promote and banned are categories too: one marker serves both)
POLICY_MARKERS = tuple(p.value for p in Policy if p.value not in CATEGORY_MARKERS)


def pytest_addoption(parser: pytest.Parser) -> None:
    g = parser.getgroup("autocast-conformance", "autocast conformance suite")
    g.addoption(
        "--backend",
        default=None,
        metavar="D",
        help="device under test: cpu, cuda, xpu, mps, mtia, hpu or a privateuse1 name (default cpu)",
    )
    g.addoption(
        "--dtype",
        default=None,
        metavar="DTYPE",
        help="lower dtype to test (float16, bfloat16) or 'all' (default: the device's default)",
    )
    g.addoption(
        "--spec",
        action="append",
        default=[],
        metavar="PATH",
        help="spec file or directory (repeatable; default: the bundled spec for this torch)",
    )
    g.addoption(
        "--reference-device",
        default=None,
        metavar="D",
        help="where the reference oracle runs (default: the backend when real, else cpu)",
    )
    g.addoption(
        "--policy-only",
        action="store_true",
        default=False,
        help="FakeTensors of the backend's device type: policy tests only, no kernels or hardware",
    )
    g.addoption(
        "--implementation",
        default="native",
        metavar="|".join(IMPLEMENTATIONS),
        help="whose autocast is tested: the backend's own (native, default) or reference_impl.autocast "
        "standing in for it (reference: self-conformance of the reference)",
    )


def options_of(config: pytest.Config) -> Options:
    return Options(
        backend=config.getoption("--backend"),
        dtype=config.getoption("--dtype"),
        spec=tuple(config.getoption("--spec") or ()),
        reference_device=config.getoption("--reference-device"),
        policy_only=bool(config.getoption("--policy-only")),
        implementation=str(config.getoption("--implementation") or "native"),
    )


def _explicit(opts: Options) -> bool:
    return any((opts.backend, opts.dtype, opts.spec, opts.reference_device, opts.policy_only)) or (
        opts.implementation != "native"
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, text in CATEGORY_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    for name in POLICY_MARKERS:
        config.addinivalue_line("markers", f"{name}: ops of the {name} policy")
    config.addinivalue_line("markers", "conformance_cases(name): parametrize 'case' from a spec generator")
    set_plugins(config.getoption("plugins") or [])  # failure snippets import them
    opts = options_of(config)
    if _explicit(opts):
        try:
            config.stash[TARGET_KEY] = resolve_target(opts, categories=mandatory_able())
        except TargetError as e:
            usage_error(str(e))
        target_of(config)  # installs the reference kernels under --implementation reference


def target_of(config: pytest.Config) -> Target:
    """The run's target; resolved on first use when no option was given (cpu)."""
    if TARGET_KEY not in config.stash:
        try:
            config.stash[TARGET_KEY] = resolve_target(options_of(config), categories=mandatory_able())
        except TargetError as e:
            usage_error(str(e))
    target = config.stash[TARGET_KEY]
    if target.uses_reference and INSTALLED_KEY not in config.stash:
        stack = contextlib.ExitStack()
        stack.enter_context(kernels_installed(target.device, target.reference_spec))
        config.stash[INSTALLED_KEY] = stack
    return target


def pytest_unconfigure(config: pytest.Config) -> None:
    if INSTALLED_KEY in config.stash:
        config.stash[INSTALLED_KEY].close()
        del config.stash[INSTALLED_KEY]

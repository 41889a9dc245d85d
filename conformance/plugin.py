"""pytest plugin: ``pytest conformance --backend <device>`` (entry point ``pytest11``).

This module registers the command-line options and the markers (the categories', from
:mod:`conformance.registry`), resolves the target before collection when an option was given
(:mod:`conformance.session`), and lists the sub-plugins: :mod:`conformance.collection`
(parametrization from the spec, fixtures, the state-leak check), :mod:`conformance.execution`
(``--mode``, ``--compile-backend``, ``--programs``, ``--compile-cache``),
:mod:`conformance.certify.isolation` (a plain run of a vendor's backend in a worker that survives
a native abort), :mod:`conformance.certify.plugin` (certification) and
:mod:`conformance.inapplicable` (tests a backend cannot have are deselected, not skipped).
"""

from __future__ import annotations

import pytest

from autocast_spec.model import Policy

from .kit.verdict import set_plugins
from .registry import mandatory_able, markers
from .session import explicit, options_of, release, set_mandatory_able, target_of
from .target import IMPLEMENTATIONS

pytest_plugins = [
    "conformance.collection",
    "conformance.certify.isolation",  # before certify.plugin, which imports it
    "conformance.certify.plugin",
    "conformance.execution",
    "conformance.inapplicable",
]

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
        "--op",
        action="append",
        default=[],
        metavar="OP",
        help="only the tests of this op (repeatable; the aten name, e.g. aten::mm): a quick run while "
        "reviewing one op; the tests of no op (context, threads, ...) run as usual; not with --certify",
    )
    g.addoption(
        "--implementation",
        default="native",
        metavar="|".join(IMPLEMENTATIONS),
        help="whose autocast is tested: the backend's own (native, default) or reference_impl.autocast "
        "standing in for it (reference: self-conformance of the reference)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, text in CATEGORY_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    for name in POLICY_MARKERS:
        config.addinivalue_line("markers", f"{name}: ops of the {name} policy")
    config.addinivalue_line(
        "markers", "conformance_cases(generator): parametrize 'case' from a category's case generator"
    )
    set_mandatory_able(config, mandatory_able())
    plugins = config.getoption("plugins") or []
    set_plugins(plugins)  # failure snippets import them
    if explicit(options_of(config)):
        target = target_of(config)  # a bad option stops here; installs the reference kernels if asked
        vendor = target.device_spec.vendor
        set_plugins(plugins, (vendor.module,) if vendor else ())


def pytest_unconfigure(config: pytest.Config) -> None:
    release(config)

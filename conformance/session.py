"""The run's target, resolved once per pytest session from the command-line options.

The plugin resolves it before collection when an option was given (a bad option stops the
run with exit code 2); otherwise the first test that needs it resolves it (cpu). Under
``--implementation reference`` the reference kernels are installed for the whole run. The
plugin hands over the categories ``mandatory_core`` may name (:func:`set_mandatory_able`)
before anything resolves the target.
"""

from __future__ import annotations

import contextlib

import pytest

from reference_impl.kernels.reference_autocast import kernels_installed

from .errors import usage_error
from .target import Options, Target, TargetError, resolve_target

TARGET_KEY = pytest.StashKey[Target]()
# The categories a spec's mandatory_core may name (the registry's, set by the plugin).
MANDATORY_ABLE_KEY = pytest.StashKey[frozenset[str]]()
# Holds the reference kernels installed for the run under --implementation reference.
INSTALLED_KEY = pytest.StashKey[contextlib.ExitStack]()


def options_of(config: pytest.Config) -> Options:
    return Options(
        backend=config.getoption("--backend"),
        dtype=config.getoption("--dtype"),
        spec=tuple(config.getoption("--spec") or ()),
        reference_device=config.getoption("--reference-device"),
        policy_only=bool(config.getoption("--policy-only")),
        implementation=str(config.getoption("--implementation") or "native"),
        ops=tuple(config.getoption("--op") or ()),
        modes=tuple(config.getoption("--mode", default=None) or ()),
        compile_backends=tuple(config.getoption("--compile-backend", default=None) or ()),
        programs=config.getoption("--programs", default=None),
        programs_shrink=float(config.getoption("--programs-shrink", default=120.0)),
    )


def explicit(opts: Options) -> bool:
    given = (
        opts.backend,
        opts.dtype,
        opts.spec,
        opts.reference_device,
        opts.policy_only,
        opts.ops,
        opts.modes,
    )
    return any(given) or opts.implementation != "native"


def set_mandatory_able(config: pytest.Config, categories: frozenset[str]) -> None:
    config.stash[MANDATORY_ABLE_KEY] = categories


def target_of(config: pytest.Config) -> Target:
    """The run's target; resolved on first use when no option was given (cpu)."""
    if TARGET_KEY not in config.stash:
        categories = config.stash.get(MANDATORY_ABLE_KEY, None)
        try:
            config.stash[TARGET_KEY] = resolve_target(options_of(config), categories=categories)
        except TargetError as e:
            usage_error(str(e))
    target = config.stash[TARGET_KEY]
    if target.uses_reference and INSTALLED_KEY not in config.stash:
        stack = contextlib.ExitStack()
        stack.enter_context(kernels_installed(target.device, target.reference_spec))
        config.stash[INSTALLED_KEY] = stack
    return target


def release(config: pytest.Config) -> None:
    """Uninstall what the run installed (the reference kernels)."""
    if INSTALLED_KEY in config.stash:
        config.stash[INSTALLED_KEY].close()
        del config.stash[INSTALLED_KEY]

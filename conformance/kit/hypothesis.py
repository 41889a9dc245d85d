"""Hypothesis settings for the suite, and the switch certification uses to derandomize it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, settings

PROFILE = "autocast-conformance"
DERANDOMIZED = "autocast-conformance-derandomized"
DERANDOMIZE_KEY = pytest.StashKey[bool]()


def _common() -> dict[str, Any]:
    return {
        "max_examples": 25,
        "deadline": None,
        "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        "database": None,
    }


def register_profiles() -> None:
    settings.register_profile(PROFILE, **_common())
    settings.register_profile(DERANDOMIZED, derandomize=True, print_blob=True, **_common())


def force_derandomize(config: pytest.Config) -> None:
    """Make every Hypothesis test of this run deterministic (certification runs call this)."""
    config.stash[DERANDOMIZE_KEY] = True


def suite_settings(config: pytest.Config) -> settings:
    """The settings Hypothesis tests in the suite run under."""
    register_profiles()
    derand = config.stash.get(DERANDOMIZE_KEY, False)
    return settings.get_profile(DERANDOMIZED if derand else PROFILE)

"""Hypothesis settings for the suite, the switch certification uses to derandomize it, and the
example databases of generated programs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

PROFILE = "autocast-conformance"
DERANDOMIZED = "autocast-conformance-derandomized"
DERANDOMIZE_KEY = pytest.StashKey[bool]()
CAMPAIGN_DB = Path(".hypothesis") / "autocast-programs"  # where a campaign saves what it finds


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


def example_database(committed: Path, *, campaign: bool) -> ExampleDatabase | None:
    """The examples a test replays first: ``committed``, the repository's (read only), and in a
    campaign (``--programs N``) what it finds, saved in ``.hypothesis/autocast-programs``
    (``AUTOCAST_PROGRAMS_DB``). A default run writes nothing."""
    repository = ReadOnlyDatabase(DirectoryBasedExampleDatabase(committed)) if committed.is_dir() else None
    if not campaign:
        return repository
    found = DirectoryBasedExampleDatabase(Path(os.environ.get("AUTOCAST_PROGRAMS_DB", CAMPAIGN_DB)))
    return MultiplexedDatabase(*(d for d in (repository, found) if d is not None))

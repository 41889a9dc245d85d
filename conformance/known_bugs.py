"""Rule, declared known bug, or failure: how a generated check judges one observation.

A check states what the spec's rule expects and what the backend did, both as short
labels. Equal: the test passes. Different, but ``spec/rules.yaml`` ``known_bugs``
declares exactly that observation for this check, device and torch release: the test
is an xfail whose reason starts ``known bug <id>`` and names the report. Anything else
fails, naming the rule and any declaration for the check.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .target import Target

# The checks a known_bugs entry may name (the schema's enum says the same).
CHECKS = (
    "promote.widest_in_tensor",
    "promote.widest_in_optional_tensor",
    "promote.foreign_float",
    "modes.exception_state",
    "modes.gradients",
    "context.any_enabled",
    "cache.other_dtype",
)
XFAIL_PREFIX = "known bug "


def xfail_reason(bug_id: str, source: str, reason: str) -> str:
    return f"{XFAIL_PREFIX}{bug_id} ({source}): {reason}"


def judge(target: Target, check: str, expected: str, observed: str, fail: Callable[[str], object]) -> None:
    """Pass, xfail with a declared bug's reason, or ``fail(message)``."""
    assert check in CHECKS, check
    if observed == expected:
        return
    rules = target.spec.rules
    bug = rules.known_bug(check, target.device, observed)
    if bug is not None:
        pytest.xfail(xfail_reason(bug.id, bug.source, bug.reason))
    declared = [b for b in rules.known_bugs if b.check == check]
    also = "".join(
        f"\n  declared known bug {b.id} ({b.loc}) observes: {' | '.join(b.observed)}" for b in declared
    )
    fail(f"the rule expects: {expected}\n  observed: {observed}{also}")


def cache_key(target: Target) -> str:
    """The cache key native autocast uses on this release: ``rules.cache.key``, or ``source``
    where a known bug of check ``cache.other_dtype`` is declared (the reference follows the rule)."""
    rules = target.spec.rules
    declared = any(
        b.check == "cache.other_dtype" and (not b.devices or target.device in b.devices)
        for b in rules.known_bugs
    )
    return "source" if declared and not target.uses_reference else rules.cache.key

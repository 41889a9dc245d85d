"""Hypothesis draws that depend on the seed only: :func:`independent_of_imports`.

Since 6.131 Hypothesis draws an integer, float or string, now and then, from the constants in
the source of every *local* module that happens to be imported (an editable install, a
vendor's plugin, a conftest: anything outside site-packages and the standard library;
HypothesisWorks/hypothesis#4348, #4366). Which modules are imported when a test draws
depends on what ran before it in the process: another test, another mode, an xdist worker's
share of the run. So a fixed seed drew different programs in the campaign script and in a bare
process (first divergence at the 79th program of seed 0), F13's program was drawn by a full
certification and not by the test command, and a shard could draw other examples on another
machine.

Inside :func:`independent_of_imports` the Hypothesis provider draws no constant at all, its
own built-in ones (large and special values) included, so the same seed draws the same
examples in any process; the suite's draws are indices and small ranges, where those never
fit. It patches one method of Hypothesis's provider for the duration (a class attribute: one
thread at a time; xdist's workers are processes); where that method does not exist (a release
before the feature, or one that renamed it) there is nothing to patch, and tests/test_draws.py
says whether the draws still agree.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:  # internal to Hypothesis: present from the release that added the constants
    from hypothesis.internal.conjecture.providers import HypothesisProvider
except ImportError:  # pragma: no cover - an older Hypothesis draws no constants
    HypothesisProvider = None  # type: ignore[assignment,misc]

METHOD = "_maybe_draw_constant"


def _no_constant(self: Any, *args: Any, **kwargs: Any) -> None:
    return None  # "no constant this time": the provider draws from its random stream instead


@contextmanager
def independent_of_imports() -> Iterator[None]:
    """Draw, inside this block, the same examples from the same seed whatever is imported."""
    original = None if HypothesisProvider is None else HypothesisProvider.__dict__.get(METHOD)
    if original is None:
        yield
        return
    setattr(HypothesisProvider, METHOD, _no_constant)
    try:
        yield
    finally:
        setattr(HypothesisProvider, METHOD, original)

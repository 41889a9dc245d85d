"""A seed draws the same examples whatever local modules the process has imported
(reference_impl/draws.py): the generated programs, and integers of the numerics category's
range."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.suite_runs import run_planted, summary
from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st

from autocast_spec.model import Spec
from reference_impl.draws import independent_of_imports
from reference_impl.programs.strategies import drawn_programs

SEED = 0


def constants(offset: int) -> str:
    """Integers a user's module could hold, from ``offset`` on. Each test imports its own:
    Hypothesis keeps every constant it has seen for the process, so the small integers the
    programs' draws use must not have been added by the other test first."""
    small = "\n".join(f"C{i} = {i + offset}" for i in range(2, 300))
    return small + "\nBIG = [" + ", ".join(str(7919 * k + offset) for k in range(1, 9)) + "]\n"


@pytest.fixture
def import_a_local_module(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[[int], None]]:
    """Imports, when called, a module outside site-packages full of integer constants from
    ``offset`` on, as a vendor's plugin or a conftest is; removed from ``sys.modules`` after."""
    name = f"vendor_constants_for_{request.node.name}"
    path = tmp_path / f"{name}.py"

    def load(offset: int) -> None:
        path.write_text(constants(offset))
        loader = importlib.util.spec_from_file_location(name, path)
        assert loader is not None and loader.loader is not None
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        loader.loader.exec_module(module)

    yield load
    sys.modules.pop(name, None)


def integers(n: int) -> list[int]:
    """The first ``n`` integers of 0..2**16 the seed draws (the numerics category's range)."""
    out: list[int] = []

    @seed(SEED)
    @settings(max_examples=n, phases=[Phase.generate], database=None, deadline=None)
    @given(st.integers(0, 2**16))
    def collect(i: int) -> None:
        out.append(i)

    with independent_of_imports():
        collect()
    return out


def test_integers_do_not_depend_on_imports(import_a_local_module: Callable[[int], None]) -> None:
    before = integers(300)
    import_a_local_module(10_000)  # within the range drawn, above the programs' small ones
    assert integers(300) == before


def test_programs_do_not_depend_on_imports(spec: Spec, import_a_local_module: Callable[[int], None]) -> None:
    before = [repr(p) for p in drawn_programs(spec, 120, SEED)]
    import_a_local_module(0)
    after = [repr(p) for p in drawn_programs(spec, 120, SEED)]
    assert after == before, f"the first program that differs is number {_first_difference(before, after)}"


def _first_difference(a: list[str], b: list[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), -1)


SEES_THE_DRAWS = """
import pytest
from reference_impl.draws import HypothesisProvider, METHOD, _no_constant

def pytest_runtest_call(item):  # inside every wrapper: as the test's body sees it
    assert HypothesisProvider.__dict__.get(METHOD) is _no_constant, item.nodeid
"""


def test_every_suite_test_draws_independently_of_imports(tmp_path: Path) -> None:
    """The suite's plugin puts each of its tests inside independent_of_imports
    (conformance/collection.py), Hypothesis's and any other: none has to remember it."""
    hypothesis_tests = "test_random_dtype_mixes or test_state_transitions or test_state_machine"
    sel = ("--backend", "cpu", "-k", hypothesis_tests)
    p, results = run_planted(tmp_path, "sees_the_draws", SEES_THE_DRAWS, *sel)
    assert results and set(results.values()) == {"passed"}, summary(p)

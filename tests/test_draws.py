"""A seed draws the same examples whatever local modules the process has imported
(reference_impl/draws.py): the generated programs, and the numerics category's random mixes."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import Phase, given, seed, settings
from hypothesis import strategies as st

from autocast_spec.model import Spec
from reference_impl.draws import independent_of_imports
from reference_impl.programs.strategies import drawn_programs

SEED = 0
# Integers a user's module could hold; wide enough that some fall in any range the draws use.
CONSTANTS = (
    "\n".join(f"C{i} = {i}" for i in range(2, 300))
    + "\nBIG = ["
    + ", ".join(str(7919 * k) for k in range(1, 9))
    + "]\n"
)


@pytest.fixture
def import_a_local_module(tmp_path: Path) -> Iterator[Callable[[], None]]:
    """Imports, when called, a module outside site-packages full of integer constants, as a
    vendor's plugin or a conftest is; removed from ``sys.modules`` after the test."""
    path = tmp_path / "vendor_constants.py"
    path.write_text(CONSTANTS)
    name = "vendor_constants_for_draws"

    def load() -> None:
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


def test_integers_do_not_depend_on_imports(import_a_local_module: Callable[[], None]) -> None:
    before = integers(300)
    import_a_local_module()
    assert integers(300) == before


def test_programs_do_not_depend_on_imports(spec: Spec, import_a_local_module: Callable[[], None]) -> None:
    before = [repr(p) for p in drawn_programs(spec, 120, SEED)]
    import_a_local_module()
    after = [repr(p) for p in drawn_programs(spec, 120, SEED)]
    assert after == before, f"the first program that differs is number {_first_difference(before, after)}"


def _first_difference(a: list[str], b: list[str]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), -1)

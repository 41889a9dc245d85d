"""How a category declares itself, in its own module: ``CATEGORY = Category(...)``.

A category (``conformance/categories/<name>.py``) names itself (its pytest marker, and the
category certification records), says what it checks in its module docstring's headline
(``<name>: <what it checks>``, the one place it is written: the marker's help and the docs
read it there), lists its checks (what a known bug's ``check`` may name) and its case
generators, the policies whose every listed op must yield tests in it, and what its checks
need from the backend. ``conformance.registry``
only finds the declarations and checks coverage; nothing else describes a category.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import pytest

from autocast_spec.model import Policy, Rules

from ..target import Target
from .case import Case

CaseGenerator = Callable[[Target], list[Case[Any]]]
Owed = Callable[[Rules], Collection[Policy]]


def owes(*policies: Policy) -> Owed:
    """The category owes tests to every listed op of these policies, whatever the rules."""
    return lambda rules: policies


def owes_nothing(rules: Rules) -> Collection[Policy]:
    return ()


@dataclass(frozen=True)
class Category:
    name: str  # the category and its pytest marker (the module's name)
    doc: str | None  # the module's docstring: its headline says what the category checks
    checks: tuple[str, ...] = ()  # "<category>.<check>": what a known bug's ``check`` may name
    generators: tuple[CaseGenerator, ...] = ()  # the functions a test's ``conformance_cases`` names
    owed: Owed = owes_nothing  # the policies whose every listed op must yield tests here
    mandatory_able: bool = True  # mandatory_core may name it
    needs_output: bool = False  # its checks look at the output of the op's kernel on its samples
    runs_kernel: bool = False  # its checks run the op's kernel (a declared kernel gap makes them not apply)
    # its cases exist only where the device file declares them: none elsewhere is no test, not a skip
    only_where_declared: bool = False

    @property
    def description(self) -> str:
        """What the category checks, in one line: its module docstring's headline."""
        headline = (self.doc or "").strip().split("\n\n")[0]
        name, sep, text = " ".join(headline.split()).partition(": ")
        if name != self.name or not sep:
            want = f"{self.name}: <what it checks>"
            raise ValueError(f"category {self.name}: its module docstring starts '{want}'")
        return text.replace("``", "").rstrip(".")

    @property
    def mark(self) -> pytest.MarkDecorator:
        """The category's marker, for a test file's ``pytestmark``."""
        return getattr(pytest.mark, self.name)


def conformance_cases(generator: CaseGenerator) -> pytest.MarkDecorator:
    """A test's ``case`` parametrized with ``generator``'s cases (the ``conformance_cases``
    marker, which ``conformance/collection.py`` reads)."""
    return pytest.mark.conformance_cases.with_args(generator)

"""The context category's tests: conformance/categories/context.py."""

from __future__ import annotations

import pytest
import torch

from conformance.categories import context
from conformance.kit.verdict import expect
from conformance.target import Target

pytestmark = [pytest.mark.context, pytest.mark.usefixtures("native_autocast")]


def test_enabled_and_dtype_queries(target: Target, lower: torch.dtype) -> None:
    expect(target, context.queries(target, lower))


def test_any_autocast_enabled(target: Target, lower: torch.dtype) -> None:
    expect(target, context.any_enabled(target, lower))


def test_no_argument_query(target: Target, lower: torch.dtype) -> None:
    expect(target, context.no_argument_query(target, lower))


def test_nesting_and_disabled_subregion(target: Target, lower: torch.dtype) -> None:
    expect(target, context.nesting(target, lower))


def test_decorator_form(target: Target, lower: torch.dtype) -> None:
    expect(target, context.decorator(target, lower))


def test_exception_restores_state(target: Target, lower: torch.dtype) -> None:
    expect(target, context.exception(target, lower))


def test_unsupported_dtype(target: Target, lower: torch.dtype) -> None:
    expect(target, context.unsupported_dtype(target, lower))


def test_unsupported_dtype_when_disabled(target: Target) -> None:
    expect(target, context.unsupported_dtype(target, None))

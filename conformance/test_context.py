"""Context semantics of the autocast under test (torch.autocast, or the reference) on the backend.

Each test watches a real call of the device's first lower_precision_fp op: it
computes in the lower dtype exactly when autocast is on.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch

from conformance.known_bugs import judge
from conformance.sentinel import make_sentinel
from conformance.target import Target
from reference_impl.dtypes import dtype_name
from reference_impl.runtime import restore_autocast, snapshot_autocast

pytestmark = [pytest.mark.context, pytest.mark.usefixtures("native_autocast")]


def _lower(lower: torch.dtype) -> str:
    return dtype_name(lower)


def test_enabled_and_dtype_queries(target: Target, lower: torch.dtype) -> None:
    d = target.device
    assert not torch.is_autocast_enabled(d)
    with target.tensors(), target.autocast_impl(d, dtype=lower):
        assert torch.is_autocast_enabled(d), f"is_autocast_enabled({d!r}) is False inside autocast"
        assert torch.get_autocast_dtype(d) == lower, (
            f"get_autocast_dtype({d!r}) is {torch.get_autocast_dtype(d)}"
        )
    assert not torch.is_autocast_enabled(d), f"is_autocast_enabled({d!r}) stays True after exit"


def test_any_autocast_enabled(target: Target, lower: torch.dtype) -> None:
    """``torch._C._is_any_autocast_enabled()`` (read by AOT autograd and the RNN modules to
    decide whether autocast is on) is True inside a region of this device, False after it."""
    d = target.device
    with target.tensors(), target.autocast_impl(d, dtype=lower):
        inside = torch._C._is_any_autocast_enabled()
    outside = torch._C._is_any_autocast_enabled()
    judge(
        target,
        "context.any_enabled",
        "inside True, outside False",
        f"inside {inside}, outside {outside}",
        lambda why: pytest.fail(
            f"torch._C._is_any_autocast_enabled() with only {d} autocast enabled\n  {why}\n"
            f"  reproduce: python -c \"import torch; torch.set_autocast_enabled('{d}', True); "
            f'print(torch._C._is_any_autocast_enabled())"',
            pytrace=False,
        ),
    )


def test_nesting_and_disabled_subregion(target: Target, lower: torch.dtype) -> None:
    """Regions act; with rules.context.nesting_restores_state, each exit restores the state it found."""
    p = make_sentinel(target)
    lo = _lower(lower)
    restores = target.spec.rules.context.nesting_restores_state

    def after_exit(want: str, message: str) -> None:
        if restores:
            assert p.output_dtype() == want, message

    with target.tensors():
        assert p.output_dtype() == "float32"
        with target.autocast_impl(target.device, dtype=lower):
            assert p.output_dtype() == lo, "autocast does not act in the outer region"
            with target.autocast_impl(target.device, enabled=False):
                assert p.output_dtype() == "float32", "enabled=False subregion still casts"
                with target.autocast_impl(target.device, dtype=lower):
                    assert p.output_dtype() == lo, "re-enabling inside a disabled region does not cast"
                after_exit("float32", "leaving the re-enabled region does not restore 'disabled'")
            after_exit(lo, "leaving the disabled subregion does not restore autocast")
        after_exit("float32", "autocast still acts after the outermost exit")


def test_decorator_form(target: Target, lower: torch.dtype) -> None:
    p = make_sentinel(target)

    @target.autocast_impl(target.device, dtype=lower)
    def body() -> str:
        return p.output_dtype()

    with target.tensors():
        assert body() == _lower(lower), "the decorator form does not enable autocast"
        assert p.output_dtype() == "float32", "the decorator form leaks autocast"


def test_exception_restores_state(target: Target, lower: torch.dtype) -> None:
    """Exceptions propagate out of regions; with rules.context.exception_restores_state,
    each region they leave restores the state it found."""
    d = target.device
    restores = target.spec.rules.context.exception_restores_state
    found = snapshot_autocast(d)
    state = lambda: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))  # noqa: E731

    def same(a: object, b: object, message: str) -> None:
        if restores:
            assert a == b, message

    before = state()
    with pytest.raises(ValueError, match="boom"), target.autocast_impl(d, dtype=lower):
        raise ValueError("boom")
    same(state(), before, f"state {state()} after an exception left one region, was {before}")
    with pytest.raises(ValueError, match="boom"), target.autocast_impl(d, dtype=lower):
        inner_before = state()
        with pytest.raises(ValueError, match="boom"), target.autocast_impl(d, enabled=False):
            raise ValueError("boom")
        same(state(), inner_before, f"state {state()} after an exception left a nested region")
        raise ValueError("boom")
    same(state(), before, f"state {state()} after exceptions left nested regions, was {before}")
    if not restores:  # the spec claims nothing: put the state back for the suite's leak check
        restore_autocast(found)


def test_unsupported_dtype(target: Target, lower: torch.dtype) -> None:
    """A dtype outside supported_dtypes: warn and disable (or as the device spec says)."""
    rule = target.device_spec.unsupported_dtype
    if rule is None:
        pytest.fail(f"the {target.device} spec gives no unsupported_dtype rule", pytrace=False)
    bad = torch.float64
    message = rule.text(target.device)
    if rule.action == "warn_and_disable":
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with target.autocast_impl(target.device, dtype=bad):
                on = torch.is_autocast_enabled(target.device)
        msgs = [str(x.message) for x in w]
        hits = [m for m in msgs if message.split(".")[0] in m]
        assert hits, f"no warning matching {message!r}: {msgs}"
        named = sorted(set(re.findall(r"torch\.(\w+)", hits[0])))
        supported = sorted(target.device_spec.supported_dtypes)
        assert not named or named == supported, (
            f"the warning names the supported dtypes {named}, the spec's supported_dtypes are "
            f"{supported}: {hits[0]!r}"
        )
        assert not on, "autocast stayed enabled with an unsupported dtype"
    elif rule.action == "error":
        with pytest.raises(Exception, match=message), target.autocast_impl(target.device, dtype=bad):
            pass
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with target.autocast_impl(target.device, dtype=bad):
                assert torch.get_autocast_dtype(target.device) == bad, "the dtype was not accepted"


def test_unsupported_dtype_when_disabled(target: Target) -> None:
    """``enabled=False`` with a dtype outside supported_dtypes: nothing to disable, so no
    warning and no error, and autocast stays off."""
    d = target.device
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with target.autocast_impl(d, dtype=torch.float64, enabled=False):
            on = torch.is_autocast_enabled(d)
    msgs = [str(x.message) for x in w if "autocast" in str(x.message).lower()]
    assert not msgs, f"autocast({d!r}, dtype=torch.float64, enabled=False) warned: {msgs}"
    assert not on, f"autocast({d!r}, dtype=torch.float64, enabled=False) enabled autocast"

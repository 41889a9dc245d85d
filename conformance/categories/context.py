"""context: the autocast context manager's semantics, per device and dtype (``rules.context``).

Parametrized per dtype under test (no per-op cases). Each check watches the sentinel (the
device's first lower_precision_fp op on float32 inputs: it computes in the lower dtype
exactly when autocast acts) or reads the state through torch's queries:

* the enabled/dtype queries inside and after a region;
* ``torch._C._is_any_autocast_enabled()`` (read by AOT autograd and the RNN modules);
* the no-argument ``torch.is_autocast_enabled()`` (read by the transformer fast paths): it
  answers for the region that is open, whatever its device;
* nesting with an ``enabled=False`` subregion and re-enabling inside it; each exit restores
  the state it found (``nesting_restores_state``);
* the decorator form;
* exceptions leaving one and two regions (``exception_restores_state``);
* a dtype outside ``supported_dtypes``: the device spec's ``unsupported_dtype`` rule (warn
  and disable, with the message naming the supported dtypes; an error; or accept), and no
  warning when the region is disabled anyway;
* a Hypothesis state machine of enter/exit (normally or by an exception),
  ``set_autocast_enabled`` and ``set_autocast_dtype`` against a stack model of the state.

A backend without autocast is the ``no_autocast`` category's.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.harness.state import restore_autocast, snapshot_autocast

from ..kit.case import Case
from ..kit.category import Category
from ..kit.intercept import make_sentinel
from ..kit.state import autocast_fields
from ..kit.verdict import Observation, expect, one_line
from ..target import Target

QUERIES = "context.queries"
ANY_ENABLED = "context.any_enabled"
NO_ARGUMENT_QUERY = "context.no_argument_query"
NESTING = "context.nesting"
DECORATOR = "context.decorator"
EXCEPTION = "context.exception"
UNSUPPORTED_DTYPE = "context.unsupported_dtype"
STATE_MACHINE = "context.state_machine"
CATEGORY = Category(
    "context",
    __doc__,
    checks=(
        QUERIES,
        ANY_ENABLED,
        NO_ARGUMENT_QUERY,
        NESTING,
        DECORATOR,
        EXCEPTION,
        UNSUPPORTED_DTYPE,
        STATE_MACHINE,
    ),
)


def _case(target: Target, lower: torch.dtype | None) -> Case[None]:
    return Case("context", target.device, lower)


def queries(target: Target, lower: torch.dtype) -> Observation:
    d = target.device
    seen = {"before": torch.is_autocast_enabled(d)}
    with target.tensors(), target.autocast_impl(d, dtype=lower):
        seen["inside"] = torch.is_autocast_enabled(d)
        dtype = dtype_name(torch.get_autocast_dtype(d))
    seen["after"] = torch.is_autocast_enabled(d)
    return Observation(
        _case(target, lower),
        QUERIES,
        f"is_autocast_enabled({d!r}) / get_autocast_dtype({d!r}) around a region",
        {"before": False, "inside": True, "dtype inside": dtype_name(lower), "after": False},
        {**seen, "dtype inside": dtype},
    )


def any_enabled(target: Target, lower: torch.dtype) -> Observation:
    """True inside a region of this device, False after it."""
    d = target.device
    with target.tensors(), target.autocast_impl(d, dtype=lower):
        inside = torch._C._is_any_autocast_enabled()
    outside = torch._C._is_any_autocast_enabled()
    return Observation(
        _case(target, lower),
        ANY_ENABLED,
        f"torch._C._is_any_autocast_enabled() with only {d} autocast enabled",
        "inside True, outside False",
        f"inside {inside}, outside {outside}",
        reproduce=f"python -c \"import torch; torch.set_autocast_enabled('{d}', True); "
        'print(torch._C._is_any_autocast_enabled())"',
    )


def no_argument_query(target: Target, lower: torch.dtype) -> Observation:
    """``torch.is_autocast_enabled()`` without a device: True inside a region of this device (the
    one the region opened), False after it. nn.TransformerEncoder's fast path reads it."""
    d = target.device
    with target.tensors(), target.autocast_impl(d, dtype=lower):
        inside = torch.is_autocast_enabled()
    outside = torch.is_autocast_enabled()
    return Observation(
        _case(target, lower),
        NO_ARGUMENT_QUERY,
        f"torch.is_autocast_enabled() (no device) inside and after a {d} region",
        "inside True, outside False",
        f"inside {inside}, outside {outside}",
        reproduce=f"python -c \"import torch; r = torch.autocast('{d}', dtype=torch.{dtype_name(lower)}); "
        'r.__enter__(); print(torch.is_autocast_enabled())"',
    )


def nesting(target: Target, lower: torch.dtype) -> Observation:
    """Regions act; with nesting_restores_state, each exit restores the state it found."""
    p = make_sentinel(target, _case(target, lower), NESTING)
    lo = dtype_name(lower)
    restores = target.spec.rules.context.nesting_restores_state
    ac = target.autocast_impl
    expected: dict[str, str] = {}
    observed: dict[str, str] = {}

    def step(name: str, want: str, after_exit: bool = False) -> None:
        if restores or not after_exit:
            expected[name] = want
            observed[name] = p.output_dtype()

    with target.tensors():
        step("before any region", "float32")
        with ac(target.device, dtype=lower):
            step("outer region", lo)
            with ac(target.device, enabled=False):
                step("enabled=False subregion", "float32")
                with ac(target.device, dtype=lower):
                    step("re-enabled inside it", lo)
                step("after the re-enabled region", "float32", after_exit=True)
            step("after the disabled subregion", lo, after_exit=True)
        step("after the outermost exit", "float32", after_exit=True)
    return Observation(
        _case(target, lower),
        NESTING,
        f"the sentinel {p.op}'s output dtype in nested regions",
        expected,
        observed,
        p.inputs,
        facts={"rule": f"rules.context.nesting_restores_state: {restores}"},
    )


def decorator(target: Target, lower: torch.dtype) -> Observation:
    p = make_sentinel(target, _case(target, lower), DECORATOR)

    @target.autocast_impl(target.device, dtype=lower)
    def body() -> str:
        return p.output_dtype()

    with target.tensors():
        observed = {"inside the decorated function": body(), "after it": p.output_dtype()}
    return Observation(
        _case(target, lower),
        DECORATOR,
        f"the sentinel {p.op}'s output dtype with the decorator form",
        {"inside the decorated function": dtype_name(lower), "after it": "float32"},
        observed,
        p.inputs,
    )


def exception(target: Target, lower: torch.dtype) -> Observation:
    """Exceptions propagate out of regions; with exception_restores_state, each region they
    leave restores the (enabled, dtype) state it found."""
    d = target.device
    restores = target.spec.rules.context.exception_restores_state
    found = snapshot_autocast(d)
    expected: dict[str, str] = {}
    observed: dict[str, str] = {}

    def state() -> str:
        now = autocast_fields(d)
        return f"enabled {now.enabled}, dtype {now.dtype}"

    def propagates(name: str, region: Callable[[], Any], inside: Callable[[], None] = lambda: None) -> None:
        before = state()
        expected[name] = "ValueError: boom"
        try:
            with region():
                inside()
                raise ValueError("boom")
            observed[name] = "the region swallowed the exception"
        except ValueError as e:
            observed[name] = one_line(e)
        if restores:
            expected[f"state after {name}"], observed[f"state after {name}"] = before, state()

    propagates("one region", lambda: target.autocast_impl(d, dtype=lower))
    propagates(
        "an outer region",
        lambda: target.autocast_impl(d, dtype=lower),
        lambda: propagates("its inner enabled=False region", lambda: target.autocast_impl(d, enabled=False)),
    )
    if not restores:  # the spec claims nothing: put the state back for the suite's leak check
        restore_autocast(found)
    return Observation(
        _case(target, lower),
        EXCEPTION,
        "an exception leaving regions",
        expected,
        observed,
        facts={"rule": f"rules.context.exception_restores_state: {restores}"},
    )


def unsupported_dtype(target: Target, lower: torch.dtype | None) -> Observation:
    """float64, outside supported_dtypes: what the device spec's unsupported_dtype says
    (``lower`` None: in a region with enabled=False, where nothing warns or enables)."""
    d = target.device
    bad = torch.float64
    case = _case(target, lower)
    what = f"torch.autocast({d!r}, dtype=torch.float64{', enabled=False' if lower is None else ''})"
    err: Exception | None = None
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            with target.autocast_impl(d, dtype=bad, enabled=lower is not None):
                on, dtype = torch.is_autocast_enabled(d), dtype_name(torch.get_autocast_dtype(d))
        except Exception as e:
            on, dtype, err = False, "", e
    error = one_line(err)  # "no error" where none
    every = [str(x.message) for x in w]
    msgs = [m for m in every if "autocast" in m.lower()]
    if lower is None:
        return Observation(
            case,
            UNSUPPORTED_DTYPE,
            what,
            {"warnings": [], "enabled": False, "raises": "no error"},
            {"warnings": msgs, "enabled": on, "raises": error},
        )
    rule = target.device_spec.unsupported_dtype
    if rule is None:
        return Observation(
            case, UNSUPPORTED_DTYPE, what, "an unsupported_dtype rule in the device spec", "none"
        )
    message = rule.text(d)
    supported = sorted(target.device_spec.supported_dtypes)
    if rule.action == "warn_and_disable":
        hits = [m for m in every if message.split(".")[0] in m]
        named = sorted(set(re.findall(r"torch\.(\w+)", hits[0]))) if hits else []
        expected = {"warning": message, "names": supported, "enabled": False, "raises": "no error"}
        observed = {
            "warning": message if hits else f"none of {every}",
            "names": named or supported,
            "enabled": on,
            "raises": error,
        }
    elif rule.action == "error":
        raised = message if err is not None and re.search(message, str(err)) else error
        expected, observed = {"error matching": message}, {"error matching": raised}
    else:
        expected = {"dtype accepted": "float64", "raises": "no error"}
        observed = {"dtype accepted": dtype, "raises": error}
    return Observation(
        case,
        UNSUPPORTED_DTYPE,
        what,
        expected,
        observed,
        facts={"rule": f"{rule.action} ({target.device_spec.loc})"},
    )


class _AutocastModel:
    """The spec's model of the thread-local state: a stack of saved (enabled, dtype)."""

    def __init__(self, enabled: bool, dtype: torch.dtype) -> None:
        self.state = (enabled, dtype)
        self.saved: list[tuple[bool, torch.dtype]] = []


def state_machine(target: Target) -> type[RuleBasedStateMachine]:
    device = target.device
    dtypes = [dtype_of(d) for d in target.device_spec.lower_dtypes]
    shown: Case[None] = Case("context", device)

    class AutocastStateMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = _AutocastModel(torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
            self.contexts: list[Any] = []

        @rule(enabled=st.booleans(), dtype=st.one_of(st.none(), st.sampled_from(dtypes)))
        def enter(self, enabled: bool, dtype: torch.dtype | None) -> None:
            ctx = target.autocast_impl(device, dtype=dtype, enabled=enabled)
            ctx.__enter__()
            self.contexts.append(ctx)
            self.model.saved.append(self.model.state)
            self.model.state = (enabled, dtype if dtype is not None else self.model.state[1])

        @precondition(lambda self: bool(self.contexts))
        @rule(raise_inside=st.booleans())
        def exit(self, raise_inside: bool) -> None:
            ctx = self.contexts.pop()
            if raise_inside:
                ctx.__exit__(RuntimeError, RuntimeError("inside"), None)
            else:
                ctx.__exit__(None, None, None)
            self.model.state = self.model.saved.pop()

        @precondition(lambda self: bool(self.contexts))
        @rule(enabled=st.booleans())
        def set_enabled(self, enabled: bool) -> None:
            torch.set_autocast_enabled(device, enabled)
            self.model.state = (enabled, self.model.state[1])

        @precondition(lambda self: bool(self.contexts))
        @rule(dtype=st.sampled_from(dtypes))
        def set_dtype(self, dtype: torch.dtype) -> None:
            torch.set_autocast_dtype(device, dtype)
            self.model.state = (self.model.state[0], dtype)

        @invariant()
        def matches_model(self) -> None:
            real = (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
            expect(
                target,
                Observation(
                    shown, STATE_MACHINE, "(enabled, dtype) against the model", self.model.state, real
                ),
            )

        def teardown(self) -> None:
            while self.contexts:
                self.contexts.pop().__exit__(None, None, None)
                self.model.state = self.model.saved.pop()
            self.matches_model()

    return AutocastStateMachine

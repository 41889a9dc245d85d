"""What arrives right below the backend's Autocast key, and the sentinel call.

A recording kernel at the Autograd key right below Autocast records each call to an op's
name and stops it before any kernel runs (:func:`reference_impl.harness.calls.intercept`), so
shapes do not matter and nothing executes. The sentinel is the device's first
lower_precision_fp op on float32 inputs: the context, cache and transition checks watch
it to see whether autocast acts and what it cast.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn

import pytest
import torch

from autocast_spec.model import Policy
from reference_impl.engine.dtypes import dtype_name
from reference_impl.harness.calls import Call, Intercepted, autograd_key_for, intercept, intercept_registered
from reference_impl.harness.samples import Materialized, call, first_tensor
from reference_impl.harness.state import quiet

from ..target import Target
from .case import Case, sentinel_op
from .inputs import make_inputs
from .verdict import Observation, expect


def intercepted(
    target: Target,
    lower: torch.dtype,
    op: str,
    fn: Callable[[], Any],
    enabled: bool = True,
    registered: bool = False,
) -> tuple[list[Call], BaseException | None]:
    """The calls to ``op``'s name that arrive right below the backend's Autocast key while
    ``fn`` runs under the autocast under test (``enabled`` or not), and any other error.
    ``registered``: watch overload ``op`` with a kernel the C++ dispatcher sees
    (:func:`reference_impl.harness.calls.intercept_registered`)."""
    key = autograd_key_for(target.dispatch_key)
    error: BaseException | None = None
    watch = intercept_registered if registered else intercept
    with quiet(), target.autocast(lower, enabled), watch(op, key) as calls:
        try:
            fn()
        except Intercepted:
            pass
        except Exception as e:
            error = e
    return calls, error


def tensor_dtypes(values: Sequence[Any]) -> list[str]:
    """The dtype names of the tensors among ``values`` (lists walked), in order."""
    out: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            out.append(dtype_name(v.dtype))
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)

    for v in values:
        walk(v)
    return out


def arrived(calls: Sequence[Call], name: str) -> list[str] | None:
    """The tensor dtypes of the first recorded call of overload ``name``; None if none arrived."""
    for c in calls:
        if c.op == name:
            return tensor_dtypes([*c.args, *c.kwargs.values()])
    return None


@dataclass
class Sentinel:
    """The device's first lower_precision_fp op (:func:`.case.sentinel_op`) on given inputs,
    watched for ``check`` of ``case``: a sentinel call that gives that check nothing to look
    at (no tensor out, no call below Autocast) is the backend's failure of that check, or
    the known bug declared for it (:func:`.verdict.expect`)."""

    target: Target
    op: str
    inputs: Materialized
    case: Case
    check: str

    def output_dtype(self) -> str:
        """The output dtype of a real call (the lower dtype when autocast acts, else float32)."""
        with quiet():
            out = call(self.op, self.inputs)
        t = first_tensor(out)
        if t is None:
            self._judged("the sentinel's output", "a tensor", "no tensor", {"output": type(out).__name__})
        return dtype_name(t.dtype)

    def arrived(self, below_autograd: bool = False) -> list[Any]:
        """The arguments as they arrive below Autocast (nothing runs). ``below_autograd``:
        catch them at the backend key instead (inference_mode skips the Autograd key)."""
        key = autograd_key_for(self.target.dispatch_key)
        if below_autograd:
            key = self._below_autograd()
        with quiet(), intercept(self.op, key) as calls, contextlib.suppress(Intercepted):
            call(self.op, self.inputs)
        if not calls:
            self._judged(
                "the sentinel's call below Autocast",
                f"{self.op} arrives at {key.name}",
                "nothing arrived",
                {"watched": f"{self.op} at {key.name}, right below {self.target.dispatch_key}"},
            )
        return [*calls[0].args, *calls[0].kwargs.values()]

    def _judged(self, what: str, expected: str, observed: str, facts: dict[str, str]) -> NoReturn:
        """The check this sentinel serves, judged on the sentinel's own call: it fails with a
        reproduction, or xfails where a known bug of that check declares ``observed``."""
        obs = Observation(self.case, self.check, what, expected, observed, self.inputs, self.op, facts)
        expect(self.target, obs)
        raise AssertionError("expect() returned on differing values")  # a harness invariant

    def _below_autograd(self) -> torch._C.DispatchKey:
        """The first key the inputs carry below Autograd: the backend's (CPU), or a layer above
        it (Functionalize, where torch_xla decomposes composite ops before its backend key)."""
        backend = getattr(torch._C.DispatchKey, self.target.dispatch_key.removeprefix("Autocast"))
        first = next(iter(self.inputs.tensors()), None)
        if first is None:
            return backend
        names = str(torch._C._dispatch_keys(first)).removeprefix("DispatchKeySet(").rstrip(")").split(", ")
        above = ("Autograd", "ADInplaceOrView", "Autocast", "Python", "Functorch", "Batched", "Fake")
        below = [n for n in names if not n.startswith(above)]  # lowest priority first
        return getattr(torch._C.DispatchKey, below[-1]) if below else backend


def make_sentinel(target: Target, case: Case, check: str, requires_grad: bool = False) -> Sentinel:
    """The sentinel on float32 inputs (weights with ``requires_grad``), for ``check`` of
    ``case`` (given the sentinel op and entry where it names no op)."""
    op = sentinel_op(target, Policy.LOWER_PRECISION_FP)
    if op is None:
        pytest.fail(
            f"the {target.device} spec lists no lower_precision_fp op with samples to test autocast with",
            pytrace=False,
        )
    with target.tensors():
        m = make_inputs(
            target.spec.ops[op].samples[0], (torch.float32,), target.device, requires_grad=requires_grad
        )
    return Sentinel(target, op, m, case if case.op else replace(case, op=op, entry=op), check)

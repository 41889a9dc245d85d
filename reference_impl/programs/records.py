"""What running a program through a pass gives (:class:`Record`), as typed, immutable data.

A record holds both sides of the comparison a check makes, eager autocast and the pass, each
run afresh from the same script: per call, the outputs (or the error) and autocast's state
right after it; the gradients' dtypes; the second call. Where the pass cannot apply to the
program, or cannot capture one of its constructs, the record says so with the reason
(:class:`NotApplicable`), apart from an error the pass should not have raised.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .tree import Program

OK = "ok"
NOT_APPLICABLE = "not_applicable"
PASS_ERROR = "pass_error"  # the pass raised where eager ran (or failed to build the program)
EAGER_ERROR = "eager_error"  # eager autocast itself raised: nothing to compare against

# torch's dtype names as whole words, in any case: float16, BFloat16, c10::Half, 'Float', torch.int64
DTYPE_NAMES = [n for n in dir(torch) if isinstance(getattr(torch, n), torch.dtype)]
DTYPE = re.compile(rf"(?<!\w)(?:{'|'.join(DTYPE_NAMES)})(?!\w)", re.IGNORECASE)
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
NUMBER = re.compile(rf"(?P<dtype>{DTYPE.pattern})|0x[0-9a-f]+|\d+", re.IGNORECASE)


def shape_of(error: str) -> str:
    """An error's first line with what changes from run to run blurred: numbers and hex addresses
    (``#``), quoted names and paths (``'…'``). Its dtype names are kept, quoted or not (``float16``
    and ``float32``, ``'Half'`` and ``'BFloat16'`` differ): a dtype is what autocast changes."""
    line = QUOTED.sub(lambda m: f"'{' '.join(DTYPE.findall(m[0])) or '…'}'", error.split("\n")[0])
    return NUMBER.sub(lambda m: m["dtype"] or "#", line)


@dataclass(frozen=True)
class AutocastState:
    """Autocast's thread-local state: per device type enabled and dtype, the cache flag, the
    nesting depth."""

    enabled: Mapping[str, bool]
    dtype: Mapping[str, str]
    cache_enabled: bool
    nesting: int

    @staticmethod
    def of(seen: Mapping[str, Any]) -> AutocastState:
        return AutocastState(
            dict(seen["enabled"]), dict(seen["dtype"]), bool(seen["cache_enabled"]), int(seen["nesting"])
        )


@dataclass(frozen=True)
class Output:
    """Where an output tensor comes from: the value (``v3``), the catalogued op that computed it
    (None: a residual add or flex_attention), and its place among that value's tensors."""

    value: str
    op: str | None
    index: int


@dataclass(frozen=True)
class CallResult:
    """One call: its output tensors, depth first (empty when it raised), or its error
    (``"Type: first line"``), and the state after it."""

    outputs: tuple[torch.Tensor, ...]
    error: str | None
    state: AutocastState

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(str(t.dtype).removeprefix("torch.") for t in self.outputs)


@dataclass(frozen=True)
class Side:
    """Eager autocast's or the pass's run of the program."""

    pass_error: str | None  # the pass failed before the first call (a trace, an export, a build)
    first: CallResult | None
    gradients: Mapping[str, str | None] | None  # parameter or "input i" -> its gradient's dtype
    gradients_error: str | None
    second: CallResult | None

    @property
    def error(self) -> str | None:
        """The first error of this side: the pass's, the first call's, the backward's."""
        if self.pass_error:
            return self.pass_error
        if self.first is not None and self.first.error:
            return self.first.error
        return self.gradients_error

    @property
    def call_error(self) -> str | None:
        """The first call's error, or the pass's before it: not the backward's."""
        if self.pass_error:
            return self.pass_error
        return self.first.error if self.first is not None else None

    def raised_where_ran(self, eager: Side) -> str | None:
        """This side's first error that ``eager`` (which ran its first call) did not raise
        there: its call's, or its backward's where eager's backward ran."""
        if self.call_error:
            return self.call_error
        return self.gradients_error if not eager.gradients_error else None


@dataclass(frozen=True)
class NotApplicable:
    reason: str
    error: str | None = None  # what the pass raised, where it ran


@dataclass(frozen=True)
class Record:
    program: Program
    pass_name: str
    eager: Side | None  # None: the pass does not apply, nothing ran
    got: Side | None
    outputs: tuple[Output, ...]  # the label of each output tensor of the first call
    not_applicable: NotApplicable | None
    second_not_applicable: NotApplicable | None  # the pass cannot make the second call
    gradients_apply: bool  # False: the pass's callable has no autograd (AOTInductor)
    script: str  # the script that ran: the reproduction
    seconds: float  # wall time of the run (both sides)

    @property
    def pass_raised_eagers_backward_error(self) -> bool:
        """A compiled program traces its backward with its forward: the error eager's backward
        raised, the pass raises before its call returns (or while it traces)."""
        eager, got = self.eager, self.got
        if eager is None or got is None or not eager.gradients_error or not got.error:
            return False
        inner = got.error.rsplit(" raised: ", 1)[-1]  # what a compiler's wrapper says was raised
        return got.error != got.gradients_error and shape_of(inner) == shape_of(eager.gradients_error)

    @property
    def status(self) -> str:
        if self.not_applicable is not None:
            return NOT_APPLICABLE
        assert self.eager is not None and self.got is not None
        if self.eager.first is None or self.eager.first.error is not None:
            return EAGER_ERROR
        if self.pass_raised_eagers_backward_error:
            return EAGER_ERROR
        return PASS_ERROR if self.got.raised_where_ran(self.eager) else OK

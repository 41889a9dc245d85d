"""threads: thread-local autocast state (``rules.context.thread_local``, ``new_thread_enabled``).

Cases, per dtype under test: each field of the state (enabled, dtype, cache flag, nesting)
read in a new thread started while the parent is inside a region and after it; and the
parent's state read while a child thread sits in its own region.

Procedure: the parent enters ``autocast(dtype, cache_enabled=False)`` nested twice; a
thread reads the state.
Expectation: under ``thread_local``, a new thread starts with the defaults (enabled as
``new_thread_enabled``, the device's default dtype, cache on, nesting 0) and the parent
does not see a child's region; otherwise both see each other's state.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from reference_impl.harness.state import quiet

from ..kit.case import Case
from ..kit.category import Category
from ..kit.refusal import require_autocast
from ..kit.state import FIELD_NAMES, autocast_fields
from ..kit.verdict import Observation
from ..target import Target

STATE = "threads.state"


class When(enum.Enum):
    PARENT_INSIDE = "parent_inside"  # the thread starts while the parent is inside its region
    PARENT_AFTER = "parent_after"  # the thread starts after the parent left it


@dataclass(frozen=True)
class ThreadReads:
    """A new thread reads one field of its state."""

    when: When
    field: str  # one of kit.state.FIELD_NAMES


@dataclass(frozen=True)
class ParentReads:
    """The parent reads its state while a child thread sits in its own region."""

    ID: ClassVar[str] = "child_region-parent_state"


def cases(target: Target) -> list[Case[ThreadReads | ParentReads]]:
    out: list[Case[ThreadReads | ParentReads]] = []
    for dtype in target.dtypes:
        out += [
            Case("threads", target.device, dtype, params=ThreadReads(w, f)) for w in When for f in FIELD_NAMES
        ]
        out.append(Case("threads", target.device, dtype, params=ParentReads()))
    return out


CATEGORY = Category(
    "threads",
    __doc__,
    checks=(STATE,),
    generators=(cases,),
)


def _in_thread(fn: Callable[[], Any]) -> Any:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def state(target: Target, case: Case[ThreadReads | ParentReads]) -> Observation:
    d = target.device
    lower = case.lower
    require_autocast(target, lower)
    ctx = target.spec.rules.context
    region = lambda: target.autocast_impl(d, dtype=lower, cache_enabled=False)  # noqa: E731
    what_region = f"torch.autocast({d!r}, dtype={lower}, cache_enabled=False), nested twice"
    outside = asdict(autocast_fields(d))  # the test starts outside any region (the suite checks that)
    # a fresh thread under thread_local: the defaults, enabled as the spec says
    fresh = {**outside, "enabled": ctx.new_thread_enabled, "dtype": target.device_spec.default_dtype}
    facts = {
        "rule": f"rules.context.thread_local: {ctx.thread_local}, "
        f"new_thread_enabled: {ctx.new_thread_enabled}"
    }
    what = "thread-local autocast state differs from the spec"
    with quiet():
        if isinstance(case.params, ParentReads):
            entered, leave = threading.Event(), threading.Event()
            seen: dict[str, Any] = {}

            def child() -> None:
                with region(), region():
                    seen.update(asdict(autocast_fields(d)))
                    entered.set()
                    leave.wait(10)

            t = threading.Thread(target=child)
            t.start()
            entered.wait(10)
            observed = asdict(autocast_fields(d))
            leave.set()
            t.join()
            steps = (
                f"a child thread enters {what_region}",
                "while it is inside, the parent reads its own state",
            )
            return Observation(
                case, STATE, what, outside if ctx.thread_local else seen, observed, facts=facts, steps=steps
            )
        assert isinstance(case.params, ThreadReads)
        inside_parent = case.params.when is When.PARENT_INSIDE
        with region(), region():
            inside = asdict(autocast_fields(d))
            got = _in_thread(lambda: asdict(autocast_fields(d))) if inside_parent else None
        if not inside_parent:
            got = _in_thread(lambda: asdict(autocast_fields(d)))
    field = case.params.field
    expected = fresh if ctx.thread_local else (inside if inside_parent else outside)
    started = "inside the region" if inside_parent else "after it"
    steps = (f"the parent enters {what_region}", f"a new thread started {started} reads {field}")
    return Observation(
        case, STATE, what, expected[field], got[field] if got else None, facts=facts, steps=steps
    )

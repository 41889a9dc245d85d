"""The one registry of test categories.

Each :class:`Category` says what a category is called (its pytest marker and the
category certification records), how its cases are generated from the spec, which
``rules.yaml`` fields it reads, the policies whose every op must yield tests in it,
and whether ``mandatory_core`` may name it. The suite plugin (markers,
parametrization, coverage), case generation and certification all read it; the
spec loader checks ``mandatory_core`` against :func:`mandatory_able`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autocast_spec.model import Policy, Rules

from . import cases as C
from . import cases_more as M
from . import semantic_cases as S
from .target import Target

Generator = Callable[[Target], list[C.Case]]

_NOT_BANNED = tuple(p for p in Policy if p is not Policy.BANNED)


def _fixed(*policies: Policy) -> Callable[[Rules], tuple[Policy, ...]]:
    return lambda rules: policies


_NONE = _fixed()


@dataclass(frozen=True)
class Category:
    name: str  # the category and its pytest marker
    description: str
    # conformance_cases(name) -> generator; empty for categories parametrized otherwise
    # (per dtype through the 'lower' fixture, or by their own module)
    generators: dict[str, Generator] = field(default_factory=dict)
    rules: tuple[str, ...] = ()  # the rules.yaml fields its checks read
    # the policies whose every listed op must yield tests here (test_coverage)
    policies: Callable[[Rules], tuple[Policy, ...]] = _NONE
    mandatory_able: bool = True  # mandatory_core may name it


CATEGORIES: tuple[Category, ...] = (
    Category(
        "op_policy",
        "output dtype per policy, for every entry point of every listed op",
        {"op_policy": C.op_policy, "entry_agreement": C.entry_agreement},
        policies=_fixed(*_NOT_BANNED),
    ),
    Category(
        "numerics",
        "native output equals the reference oracle's (needs the backend's kernels)",
        {"numerics": C.numerics},
        ("default_tolerance",),
        _fixed(*_NOT_BANNED),
    ),
    Category(
        "eligibility",
        "float64/int/bool, other-device, in-place and out= inputs are never cast",
        {"eligibility": C.eligibility},
        ("eligibility", "out_of_place_only"),
        _fixed(*Policy),
    ),
    Category(
        "registration",
        "the backend's Autocast kernels are exactly the spec's ops",
        {"registration": C.registration},
        policies=_fixed(*Policy),
    ),
    Category(
        "unlisted",
        "ops the spec does not list run in their input dtype",
        {"unlisted": C.unlisted},
        ("unlisted_watchlist",),
    ),
    Category(
        "promote",
        "promote policy: mixed inputs go to the widest type",
        {"promote": C.promote, "promote_widest": M.promote_widest, "promote_foreign": M.promote_foreign},
        ("promote",),
        _fixed(Policy.PROMOTE),
    ),
    Category(
        "banned", "banned ops raise the spec's message", {"banned": C.banned}, policies=_fixed(Policy.BANNED)
    ),
    Category("opt_dtype", "fp32_set_opt_dtype respects an explicit dtype=", {"opt_dtype": C.opt_dtype}),
    Category(
        "context",
        "autocast context semantics per device and dtype: nesting, decorator, exceptions, dtypes",
        rules=("context.nesting_restores_state", "context.exception_restores_state"),
    ),
    Category(
        "threads",
        "thread-local autocast state (enabled, dtype, cache flag, nesting) in a new thread",
        {"threads": S.threads},
        ("context.thread_local", "context.new_thread_enabled"),
    ),
    Category(
        "cache",
        "the weight-cast cache, per op of the cached policies",
        {"cache": S.cache},
        ("cache",),
        lambda rules: rules.cache.policies,
    ),
    Category(
        "transitions",
        "state changes between two calls in one region (grad mode, cache flag, nesting, dtype)",
        rules=("cache", "context"),
        mandatory_able=False,  # a Hypothesis state machine: its examples are drawn
    ),
    Category(
        "autograd",
        "gradient dtypes and backward under autocast; torch.utils.checkpoint recompute",
        {"autograd": C.autograd, "checkpoint": M.checkpoint},
        policies=_fixed(Policy.LOWER_PRECISION_FP, Policy.FP32),
    ),
    Category(
        "functorch",
        "every listed op's policy under torch.vmap and torch.func.grad",
        {"functorch": M.functorch},
    ),
    Category(
        "custom_function",
        "torch.amp.custom_fwd / custom_bwd",
        {"custom_function": S.custom_function},
        ("eligibility",),
    ),
    Category(
        "custom_op",
        "torch.library.custom_op with register_autocast follows the eligibility rules",
        {"custom_op": S.custom_op},
        ("eligibility", "custom_ops"),
    ),
    Category("coverage", "every spec entry yields tests", mandatory_able=False),
    Category("jit", "TorchScript / trace / torch.compile limitations and mode checks", mandatory_able=False),
)

BY_NAME: dict[str, Category] = {c.name: c for c in CATEGORIES}
GENERATORS: dict[str, Generator] = {g: fn for c in CATEGORIES for g, fn in c.generators.items()}

# Markers that are not categories: how a test runs, not what it checks.
RUN_MARKERS = {
    "conformance": "a test generated by the autocast conformance suite",
    "hypothesis": "property-based tests (random dtype mixes, state machines)",
    "requires_kernels": "needs the backend's kernels: skipped with --policy-only",
    "real_tensors": "needs real tensors (C++ cast cache, backward): skipped with --policy-only",
    "mode_check": "an op run through --mode script|trace|compile vs eager",
}


def markers() -> dict[str, str]:
    """Every marker the suite registers: the categories, then the run markers."""
    return {**{c.name: c.description for c in CATEGORIES}, **RUN_MARKERS}


def category_of(generator: str) -> str:
    """The category a generator (a ``conformance_cases`` name) belongs to."""
    return next(c.name for c in CATEGORIES if generator in c.generators)


def category_names() -> frozenset[str]:
    return frozenset(BY_NAME)


def mandatory_able() -> frozenset[str]:
    return frozenset(c.name for c in CATEGORIES if c.mandatory_able)


_CACHE: dict[tuple[int, str], list[C.Case]] = {}


def cases(target: Target, generator: str) -> list[C.Case]:
    key = (id(target), generator)
    if key not in _CACHE:
        _CACHE[key] = GENERATORS[generator](target)
    return _CACHE[key]


def expected_categories(policy: Policy, rules: Rules) -> tuple[str, ...]:
    """The categories every listed op of ``policy`` must produce tests in."""
    return tuple(c.name for c in CATEGORIES if c.generators and policy in c.policies(rules))


def coverage(target: Target) -> dict[str, list[str]]:
    """For each listed op, the categories in which it yields no test."""
    produced: dict[str, set[str]] = {}
    for c in CATEGORIES:
        for gen in c.generators:
            for case in cases(target, gen):
                produced.setdefault(case.op, set()).add(c.name)
    rules = target.spec.rules
    owed: dict[str, set[str]] = {op: set() for op, _ in C._listed(target)}
    for dtype in target.dtypes:  # the policies the ops follow under the dtypes tested (by_dtype)
        for op, pol in C._listed(target, dtype):
            owed[op].update(expected_categories(pol, rules))
    return {op: sorted(c for c in owed[op] if c not in produced.get(op, set())) for op in owed}

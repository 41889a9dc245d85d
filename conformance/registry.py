"""The one registry of test categories.

Each :class:`Category` names a category (its pytest marker, and the category certification
records), its module under ``conformance/categories/`` (the cases, the procedure and the
expectation, readable top to bottom), the policies whose every listed op must yield tests
in it, and whether ``mandatory_core`` may name it. The plugin's markers, parametrization,
the coverage test and certification read it; the spec loader checks ``mandatory_core``
against :func:`mandatory_able`; the checks a known bug may name (:func:`all_checks`) are
those the category modules and the modes declare, with the suite-wide ones below, and
``tests/test_semantic_rules.py`` holds them against the schema's lists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from autocast_spec.model import Policy, Rules

from .categories import (
    autograd,
    banned,
    cache,
    context,
    custom_function,
    custom_op,
    eligibility,
    functorch,
    numerics,
    op_policy,
    opt_dtype,
    promote,
    python_surface,
    registration,
    threads,
    transitions,
    unlisted,
)
from .kit.case import Case, listed
from .modes import exceptions, gradients, ops, regions, scenarios
from .target import Target

Generator = Callable[[Target], list[Case]]

_NOT_BANNED = tuple(p for p in Policy if p is not Policy.BANNED)


def _fixed(*policies: Policy) -> Callable[[Rules], tuple[Policy, ...]]:
    return lambda rules: policies


_NONE = _fixed()


@dataclass(frozen=True)
class Category:
    name: str  # the category and its pytest marker
    description: str
    module: ModuleType | None = None  # its GENERATORS and CHECKS; None: checks of its own kind
    # the policies whose every listed op must yield tests here (test_coverage)
    policies: Callable[[Rules], tuple[Policy, ...]] = _NONE
    mandatory_able: bool = True  # mandatory_core may name it
    # whether its checks need the op's kernel to run its samples (an output to look at)
    needs_output: Callable[[Case], bool] = lambda case: False

    @property
    def generators(self) -> dict[str, Generator]:
        return dict(getattr(self.module, "GENERATORS", {}))

    @property
    def checks(self) -> tuple[str, ...]:
        return tuple(getattr(self.module, "CHECKS", ()))


CATEGORIES: tuple[Category, ...] = (
    Category(
        "op_policy",
        "output dtype per policy, for every entry point of every listed op",
        op_policy,
        _fixed(*_NOT_BANNED),
    ),
    Category(
        "numerics",
        "native output equals the reference oracle's (needs the backend's kernels)",
        numerics,
        _fixed(*_NOT_BANNED),
        needs_output=lambda case: True,
    ),
    Category(
        "eligibility",
        "float64/int/bool, other-device, in-place and out= inputs are never cast",
        eligibility,
        _fixed(*Policy),
        # other_device compares outputs, except for an intercept_only op (it watches arrivals)
        needs_output=lambda case: False,
    ),
    Category(
        "registration",
        "the backend's Autocast kernels are exactly the spec's ops",
        registration,
        _fixed(*Policy),
    ),
    Category("unlisted", "ops the spec does not list run in their input dtype", unlisted),
    Category(
        "promote", "promote policy: mixed inputs go to the widest type", promote, _fixed(Policy.PROMOTE)
    ),
    Category("banned", "banned ops raise the spec's message", banned, _fixed(Policy.BANNED)),
    Category("opt_dtype", "fp32_set_opt_dtype respects an explicit dtype=", opt_dtype),
    Category(
        "context",
        "autocast context semantics per device and dtype: nesting, decorator, exceptions, dtypes",
        context,
    ),
    Category(
        "threads",
        "thread-local autocast state (enabled, dtype, cache flag, nesting) in a new thread",
        threads,
    ),
    Category(
        "cache",
        "the weight-cast cache, per op of the cached policies",
        cache,
        lambda rules: rules.cache.policies,
    ),
    Category(
        "transitions",
        "state changes between two calls in one region (grad mode, cache flag, nesting, dtype)",
        transitions,
        mandatory_able=False,  # a Hypothesis state machine: its examples are drawn
    ),
    Category(
        "autograd",
        "gradient dtypes and backward under autocast; torch.utils.checkpoint recompute",
        autograd,
        _fixed(Policy.LOWER_PRECISION_FP, Policy.FP32),
        needs_output=lambda case: True,
    ),
    Category(
        "functorch",
        "every listed op's policy under torch.vmap and torch.func.grad",
        functorch,
        needs_output=lambda case: True,
    ),
    Category("custom_function", "torch.amp.custom_fwd / custom_bwd", custom_function),
    Category(
        "python_surface",
        "the public autocast entry points: aliases, argument checks, getters, the cache across threads",
        python_surface,
    ),
    Category(
        "custom_op", "torch.library.custom_op with register_autocast follows the eligibility rules", custom_op
    ),
    Category("coverage", "every spec entry yields tests", mandatory_able=False),
    Category("jit", "TorchScript / trace / torch.compile limitations and mode checks", mandatory_able=False),
)

BY_NAME: dict[str, Category] = {c.name: c for c in CATEGORIES}
GENERATORS: dict[str, Generator] = {g: fn for c in CATEGORIES for g, fn in c.generators.items()}
# The checks of the execution modes (the jit category's): they live in conformance/modes/.
MODE_CHECKS = (
    ops.MATCHES_EAGER,
    regions.REGION,
    gradients.GRADIENTS,
    exceptions.EXCEPTION_STATE,
    scenarios.LIMITATION,
)
# The coverage category's checks (conformance/test_coverage.py, on this registry).
OP_HAS_TESTS = "coverage.op_has_tests"
RULE_HAS_TESTS = "coverage.rule_has_tests"
# The check conformance/collection.py runs around every suite test: the test leaves the
# thread's autocast state as it found it (a context rule: every region's exit restores it).
LEAKED_STATE = "context.leaked_state"

# Markers that are not categories: how a test runs, not what it checks.
RUN_MARKERS = {
    "conformance": "a test generated by the autocast conformance suite",
    "hypothesis": "property-based tests (random dtype mixes, state machines)",
    "requires_kernels": "needs the backend's kernels: skipped with --policy-only",
    "real_tensors": "needs real tensors (C++ cast cache, backward): skipped with --policy-only",
    "mode_check": "an op run through --mode script|trace|compile|export|aoti vs eager",
    "slow": "builds C++ per batch (--mode aoti: AOTInductor packages, minutes cold); -m 'not slow' skips it",
}


def markers() -> dict[str, str]:
    """Every marker the suite registers: the categories, then the run markers."""
    return {**{c.name: c.description for c in CATEGORIES}, **RUN_MARKERS}


def all_checks() -> tuple[str, ...]:
    """Every check of the suite: what a known bug's ``check`` may name."""
    suite_wide = {*MODE_CHECKS, OP_HAS_TESTS, RULE_HAS_TESTS, LEAKED_STATE}
    return tuple(sorted({ch for c in CATEGORIES for ch in c.checks} | suite_wide))


def category_of(generator: str) -> str:
    """The category a generator (a ``conformance_cases`` name) belongs to."""
    return next(c.name for c in CATEGORIES if generator in c.generators)


def category_names() -> frozenset[str]:
    return frozenset(BY_NAME)


def mandatory_able() -> frozenset[str]:
    return frozenset(c.name for c in CATEGORIES if c.mandatory_able)


def needs_output(case: Case) -> bool:
    c = BY_NAME.get(case.category)
    return c is not None and c.needs_output(case)


# The categories whose checks run the op's kernel on the backend's real tensors (a kernel gap
# the op catalog declares for the device and dtype makes them not apply).
KERNEL_RUNNING = ("op_policy", "numerics", "autograd", "functorch", "promote", "opt_dtype")


def runs_kernel(case: Case) -> bool:
    return case.category in KERNEL_RUNNING


_CACHE: dict[tuple[int, str], list[Case]] = {}


def cases(target: Target, generator: str) -> list[Case]:
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
    owed: dict[str, set[str]] = {op: set() for op, _ in listed(target)}
    for dtype in target.dtypes:  # the policies the ops follow under the dtypes tested (by_dtype)
        for op, pol in listed(target, dtype):
            owed[op].update(expected_categories(pol, rules))
    return {op: sorted(c for c in owed[op] if c not in produced.get(op, set())) for op in owed}

"""How mutants change a backend: wrong Autocast kernels, registered with ``torch.library``.

Two kinds of kernel:

- :func:`spec_kernels`: the reference autocast's own kernel built from a *mutated*
  spec (an op under another policy, a relaxed eligibility rule). The policy engine
  then deviates exactly as the mutation says, and nothing else changes.
- :func:`cast_kernel` and :func:`register`: small hand-written kernels for
  deviations no spec can express (wrong numbers with the right dtype, a cache that
  keeps the wrong tensors).

Registrations live in this process (the mutant's suite subprocess) until it exits.
:func:`cpu_sentinel_op` names the op the suite's context and cache checks watch on cpu (the
cache mutants and the real-bug cache replays wrap its kernel).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from functools import lru_cache
from typing import Any

import torch

from autocast_spec.model import OpPolicy, Policy, Rules, Spec
from reference_impl.engine.torch_registry import dispatch_key, op_overload, split_op_name
from reference_impl.kernels.reference_autocast import op_kernel
from reference_impl.spectools.installed_spec import load_installed_spec

_LIBS: list[torch.library.Library] = []


@lru_cache(maxsize=1)
def bundled() -> Spec:
    """The bundled spec for the installed torch: what the suite checks against."""
    return load_installed_spec()


def key_of(device: str) -> str:
    return bundled().device(device).dispatch_key


def register(op: str, kernel: Callable[..., Any], device: str) -> None:
    """Register ``kernel`` for ``op`` at ``device``'s Autocast key (overriding the native one)."""
    ns, name, overload = split_op_name(op)
    lib = torch.library.Library(ns, "IMPL")
    _LIBS.append(lib)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        lib.impl(f"{name}.{overload}" if overload else name, kernel, key_of(device))


@contextlib.contextmanager
def below_autocast(device: str) -> Iterator[None]:
    """Redispatch below ``device``'s Autocast key."""
    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(dispatch_key(key_of(device)))):
        yield


# ---------------------------------------------------------------------------
# Mutated specs, run by the reference's kernel
# ---------------------------------------------------------------------------


def spec_kernels(spec: Spec, device: str, ops: Iterable[str]) -> None:
    """Register the reference kernel of ``spec`` (a mutated spec) for ``ops`` on ``device``."""
    dspec = spec.device(device)
    key = dispatch_key(dspec.dispatch_key)
    for op in ops:
        register(op, op_kernel(op, dspec, spec, key), device)


def with_policy(spec: Spec, device: str, op: str, policy: Policy, message: str | None = None) -> Spec:
    """``spec`` with ``op`` listed under ``policy`` on ``device`` (added when unlisted)."""
    dspec = spec.device(device)
    old = dspec.ops.get(op)
    loc = old.loc if old is not None else dspec.loc
    if policy is Policy.BANNED and message is None:
        message = f"mutant: {op} is banned"
    entry = OpPolicy(op, policy, loc, message)
    ops = {**dspec.ops, op: entry}
    return replace(spec, devices={**spec.devices, device: replace(dspec, ops=ops)})


def with_rules(spec: Spec, **changes: Any) -> Spec:
    """``spec`` with rules changed: eligibility fields by name, or ``out_of_place_only``."""
    rules: Rules = spec.rules
    elig = {k: v for k, v in changes.items() if hasattr(rules.eligibility, k)}
    rest = {k: v for k, v in changes.items() if k not in elig}
    return replace(spec, rules=replace(rules, eligibility=replace(rules.eligibility, **elig), **rest))


def move(device: str, op: str, policy: Policy) -> None:
    """The backend runs ``op`` under ``policy`` (whatever the spec says)."""
    spec_kernels(with_policy(bundled(), device, op, policy), device, [op])


def drop(device: str, op: str) -> None:
    """The backend has no autocast for ``op``: its kernel only redispatches."""
    target = op_overload(op)

    def untouched(*args: Any, **kwargs: Any) -> Any:
        with below_autocast(device):
            return target(*args, **kwargs)

    register(op, untouched, device)


# ---------------------------------------------------------------------------
# Hand-written kernels
# ---------------------------------------------------------------------------


def map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(map_tensors(v, fn) for v in value)
    return value


def floating_on(device: str, t: torch.Tensor) -> bool:
    """Eligible as the spec says: floating, not float64, on the autocast device."""
    return t.is_floating_point() and t.dtype != torch.float64 and t.device.type == device


def cast_kernel(
    op: str,
    device: str,
    to: Callable[[torch.Tensor, torch.dtype], torch.dtype | None],
    after: Callable[[Any], Any] = lambda out: out,
    before: Callable[[torch.Tensor], torch.Tensor] = lambda t: t,
) -> None:
    """Each tensor argument goes to ``to(tensor, autocast_dtype)`` (None: untouched), cast
    from ``before(tensor)``; the output passes through ``after``."""
    target = op_overload(op)

    def kernel(*args: Any, **kwargs: Any) -> Any:
        lower = torch.get_autocast_dtype(device)

        def cast(t: torch.Tensor) -> torch.Tensor:
            d = to(t, lower)
            return t if d is None or d == t.dtype else before(t).to(d)

        with below_autocast(device):
            return after(target(*map_tensors(args, cast), **map_tensors(kwargs, cast)))

    register(op, kernel, device)


def caching_kernel(op: str, device: str, keep: Callable[[torch.Tensor], bool]) -> None:
    """Lower-precision casts with a weight cache that keeps every tensor ``keep`` accepts
    (the native cache keeps float32 leaf tensors that require grad)."""
    target = op_overload(op)
    cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def kernel(*args: Any, **kwargs: Any) -> Any:
        lower = torch.get_autocast_dtype(device)

        def cast(t: torch.Tensor) -> torch.Tensor:
            if not floating_on(device, t) or t.dtype == lower:
                return t
            if keep(t):
                hit = cache.get(id(t))
                if hit is None or hit[0] is not t:
                    hit = cache[id(t)] = (t, t.to(lower))
                return hit[1]
            return t.to(lower)

        with below_autocast(device):
            return target(*map_tensors(args, cast), **map_tensors(kwargs, cast))

    register(op, kernel, device)


def cpu_sentinel_op() -> str:
    """The op the suite's context, cache and transition checks watch on cpu (the sentinel)."""
    from conformance.kit.case import sentinel_op
    from conformance.target import Options, resolve_target

    op = sentinel_op(resolve_target(Options("cpu", None, (), None, False)))
    assert op is not None
    return op

"""The code every rendered script carries, copied into it as source (:func:`source_of`).

A generated program's script (:mod:`.render`) is standalone: it imports torch and the standard
library only. Its program part is generated; this part is the same in every script and lives
here as real code (linted, typed, importable: the menu builds its probe tensors with
:func:`make_tensor`, as the scripts do). The script's ``observe()`` runs the program eagerly
and through one pass with :func:`side` and returns plain data; ``report()`` prints it.

Names :func:`side` reads from the script's globals (given to it): ``build()`` (the program: a
function or a module), ``make_inputs(variant)`` (its graph inputs), ``autocast_state()``,
``around_first()`` / ``around_second()`` (the regions around the calls), ``CONTEXT``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import torch


def make_tensor(
    shape: Sequence[int], domain: str, dtype: torch.dtype, seed: int, requires_grad: bool = False
) -> torch.Tensor:
    """A tensor of ``shape`` with values of the catalog's ``domain``, from its own seed."""
    gen = torch.Generator().manual_seed(seed)
    size = tuple(shape)
    if domain.startswith("index:"):
        t = torch.randint(0, max(int(domain.split(":", 1)[1]), 1), size, generator=gen)
    elif domain == "binary":
        t = torch.randint(0, 2, size, generator=gen).float()
    elif domain == "ones":
        t = torch.ones(size)
    elif domain == "spd":
        a = torch.randn(size, generator=gen)
        t = a @ a.transpose(-1, -2) / size[-1] + torch.eye(size[-1]).expand(size)
    elif domain == "normal":
        t = torch.randn(size, generator=gen)
    else:
        u = torch.rand(size, generator=gen)
        low, width = {
            "positive": (0.5, 1.0),
            "nonneg": (0.0, 1.0),
            "unit": (-0.9, 1.8),
            "probability": (0.05, 0.9),
            "small": (-0.1, 0.2),
        }[domain]
        t = u * width + low
    t = t.to(dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensors_of(value: Any) -> list[torch.Tensor]:
    """Every tensor in ``value``, depth first through tuples and lists."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_of(v)]
    return []


def first_line(exc: BaseException) -> str:
    """``"Type: first line"``; where that line only introduces the cause (``... raised:``), the
    cause's line too."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.endswith(":") and len(lines) > 1:
        text = f"{text} {lines[1]}"
    return f"{type(exc).__name__}: {text}"[:500]


GRAD_MODES: dict[str, Callable[[], Any]] = {
    "grad": torch.enable_grad,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def call(
    fn: Callable[..., Any],
    inputs: Sequence[torch.Tensor],
    grad_mode: str,
    around: Callable[[], Any],
    state: Callable[[], dict[str, Any]],
) -> dict[str, Any]:
    """One call of ``fn`` in ``grad_mode`` inside the region ``around()``: its outputs (or its
    error), and the autocast state right after it, still inside that region."""
    seen: dict[str, Any] = {"outputs": None, "error": None}
    with GRAD_MODES[grad_mode](), around():
        try:
            seen["outputs"] = fn(*inputs)
        except Exception as exc:  # the call's error is what is observed
            seen["error"] = first_line(exc)
        seen["state"] = state()
    return seen


def parameter_name(name: str) -> str:
    """A parameter's name as the program's module names it (torch.compile prefixes its own)."""
    return name.removeprefix("_orig_mod.")


def gradients(fn: Any, inputs: Sequence[torch.Tensor], outputs: Any) -> dict[str, str | None] | None:
    """Backward from the sum of the floating (and complex) outputs that require grad, then each
    parameter's and each input's gradient dtype (None: no gradient). None when nothing requires
    grad."""
    floating = [
        t for t in tensors_of(outputs) if t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]
    if not floating:
        return None
    loss = torch.stack([(torch.view_as_real(t) if t.is_complex() else t).float().sum() for t in floating])
    loss.sum().backward()
    named: list[tuple[str, torch.Tensor]] = (
        list(fn.named_parameters()) if isinstance(fn, torch.nn.Module) else []
    )
    named += [(f"input {i}", t) for i, t in enumerate(inputs) if t.requires_grad]
    return {
        parameter_name(n): None if p.grad is None else str(p.grad.dtype).removeprefix("torch.")
        for n, p in named
    }


def side(
    apply_pass: Callable[[Any, Sequence[torch.Tensor]], Any], context: dict[str, Any], g: dict[str, Any]
) -> dict[str, Any]:
    """The program (``g``: the script's globals) built afresh, given to ``apply_pass`` and called
    as ``context`` says: the first call, its gradients, and the second call. Autocast's state is
    put back afterwards (what eager leaves must not change what the pass starts from)."""
    before = g["autocast_state"]()
    try:
        return observed_side(apply_pass, context, g)
    finally:
        g["restore_autocast_state"](before)


def observed_side(
    apply_pass: Callable[[Any, Sequence[torch.Tensor]], Any], context: dict[str, Any], g: dict[str, Any]
) -> dict[str, Any]:
    model = g["build"]()
    if isinstance(model, torch.nn.Module):
        model.train(context["training"])
    example = g["make_inputs"](False)
    seen: dict[str, Any] = {"pass_error": None, "first": None, "gradients": None, "second": None}
    try:
        with g["around_first"]():  # exported and built where it is called (the region around it)
            fn = apply_pass(model, example)
    except Exception as exc:  # the pass's own failure (a trace, an export, a build)
        seen["pass_error"] = first_line(exc)
        return seen
    grad_mode, state = context["grad_mode"], g["autocast_state"]
    seen["first"] = call(fn, example, grad_mode, g["around_first"], state)
    if seen["first"]["error"] is None and grad_mode == "grad":
        try:
            # a pass's callable that is no module (a compiled module run under a configuration)
            # trains the program's own Parameters
            holder = fn if isinstance(fn, torch.nn.Module) else model
            seen["gradients"] = gradients(holder, example, seen["first"]["outputs"])
        except Exception as exc:  # a backward that fails is observed as such
            seen["gradients"] = {"error": first_line(exc)}
    second = context["second"]
    if second == "shape":
        seen["second"] = call(fn, g["make_inputs"](True), grad_mode, g["around_first"], state)
    elif second == "state":
        seen["second"] = call(fn, g["make_inputs"](False), grad_mode, g["around_second"], state)
    return seen


def described(seen: dict[str, Any] | None) -> str:
    """One call's outputs as dtypes, or its error, and the state after it."""
    if seen is None:
        return "-"
    what = seen["error"] or ", ".join(
        str(t.dtype).removeprefix("torch.") for t in tensors_of(seen["outputs"])
    )
    return f"{what} | state after: {seen['state']}"


def max_abs_difference(a: Any, b: Any) -> float | None:
    """The largest absolute difference over outputs of equal shape (None: none to compare)."""
    worst = None
    for x, y in zip(tensors_of(a), tensors_of(b), strict=False):
        if x.shape == y.shape and x.is_floating_point() and y.is_floating_point():
            d = (x.detach().double() - y.detach().double()).abs().nan_to_num(0.0)
            worst = max(worst or 0.0, float(d.max()) if d.numel() else 0.0)
    return None if worst is None or math.isnan(worst) else worst


def report(observed: dict[str, Any]) -> None:
    """Print what ``observe()`` returned: per side, the calls, the gradients; and the differences."""
    eager, other = observed["eager"], observed["pass"]
    print(f"pass: {observed['pass_name']}")
    for label, seen in (("eager", eager), (observed["pass_name"], other)):
        if seen["pass_error"]:
            print(f"{label}: the pass failed: {seen['pass_error']}")
            continue
        print(f"{label}: first call: {described(seen['first'])}")
        print(f"{label}: gradients: {seen['gradients']}")
        if seen["second"] is not None:
            print(f"{label}: second call ({observed['second']}): {described(seen['second'])}")
    for call_name in ("first", "second"):
        a, b = eager.get(call_name), other.get(call_name)
        if a and b and a["error"] is None and b["error"] is None:
            print(f"max abs difference ({call_name} call): {max_abs_difference(a['outputs'], b['outputs'])}")


def source_of(*functions: Callable[..., Any]) -> str:
    """The source text of ``functions`` (and of :data:`GRAD_MODES` where ``call`` is among
    them), as the script carries it."""
    parts = []
    for fn in functions:
        if fn is call:
            parts.append(
                "GRAD_MODES = {\n"
                + "".join(f"    {k!r}: torch.{v.__name__},\n" for k, v in GRAD_MODES.items())
                + "}\n"
            )
        parts.append(inspect.getsource(fn))
    return "\n\n".join(parts)


HARNESS: tuple[Callable[..., Any], ...] = (
    make_tensor,
    tensors_of,
    first_line,
    call,
    parameter_name,
    gradients,
    side,
    observed_side,
    described,
    max_abs_difference,
    report,
)

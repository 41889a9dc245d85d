"""The ops a generated program can call on one device, read from the spec's catalog.

Each catalogued op comes with the ways to call it (:class:`OpForm`: its entry points with their
samples, and the aten overload with each of the op's samples) and its policy on the device (or
``unlisted``). Whether a form runs with given input dtypes under a given autocast state, and
what it returns, is not written anywhere: the menu asks the installed torch, eagerly, once per
question (:meth:`Menu.probe`, cached), with the tensors a script would build
(:func:`.script_code.make_tensor`). The strategies draw only what the device runs.

Left out, each for a reason the catalog states: ops without a FakeTensor kernel, ops whose
kernel needs the device runtime or cannot run the samples (``intercept_only``), kernel gaps of
the device and dtype, and ops whose outputs change from call to call (``nondeterministic``,
``scratch_outputs``): a pass could not be compared with eager on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from autocast_spec.catalog import Arg, ListArg, OpInfo, Sample, TensorArg
from autocast_spec.model import POLICY_ORDER, Spec

from ..engine.dtypes import dtype_of
from ..engine.torch_registry import op_overload
from ..harness.samples import entry_point_sample, resolve_entry_point
from ..harness.state import quiet, raw_autocast
from .script_code import make_tensor, tensors_of

UNLISTED = "unlisted"  # a catalogued op the device does not list
INPUT_KINDS: tuple[str, ...] = ("float32", "lower", "mixed")
SCALE = 2  # a second call's inputs: every dimension this many times larger


@dataclass(frozen=True)
class OpForm:
    """One way to call a catalogued op: an entry point (or the op's aten overload, ``entry`` ==
    ``op``) with a sample of the catalog."""

    op: str
    entry: str
    sample: Sample
    policy: str
    differentiable: bool

    @property
    def key(self) -> tuple[str, str, str]:
        """A hashable name for the form (the sample's place in the catalog)."""
        return (self.op, self.entry, str(self.sample.loc))

    def slots(self) -> tuple[TensorArg, ...]:
        """The sample's tensors, in argument order (keyword arguments after)."""
        return tuple(tensor_args(self.sample))

    def float_slots(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.slots()) if t.is_test_float)


def tensor_args(sample: Sample) -> Iterator[TensorArg]:
    def walk(arg: Arg) -> Iterator[TensorArg]:
        if isinstance(arg, TensorArg):
            yield arg
        elif isinstance(arg, ListArg):
            for item in arg.items:
                yield from walk(item)

    for arg in (*sample.args, *sample.kwargs.values()):
        yield from walk(arg)


def slot_dtypes(form: OpForm, inputs: str, lower: str) -> tuple[str, ...]:
    """Each slot's dtype for input kind ``inputs``: float32, ``lower``, or alternating (the
    first floating slot ``lower``); a slot of a fixed dtype keeps it."""
    out = []
    floats = 0
    for t in form.slots():
        if not t.is_test_float:
            out.append(t.dtype)
            continue
        low = inputs == "lower" or (inputs == "mixed" and floats % 2 == 0)
        out.append(lower if low else "float32")
        floats += 1
    return tuple(out)


@dataclass(frozen=True)
class Probe:
    """What a form returned: each output tensor's shape and dtype, depth first."""

    outputs: tuple[tuple[tuple[int, ...], str], ...]
    tensors_only: bool  # every leaf of the result is a tensor (what torch.cond returns)
    fresh: bool = True  # no output shares memory with an input (a torch.cond branch may not alias)
    complex_inside: bool = False  # some aten op of the call made a complex tensor

    @property
    def dense_real(self) -> bool:
        """Nothing complex, out or inside: torch.cond checks a complex tensor's strides as its
        real view's and refuses them, also for the gradients its compiled backward makes through
        one (fft_hfft; without autocast too: a torch.cond limitation, not autocast's)."""
        return not self.complex_inside and not any(d.startswith("complex") for _, d in self.outputs)

    @property
    def primary(self) -> int | None:
        """The index of the first floating output (what a later op is fed), or None."""
        return next((i for i, (_, d) in enumerate(self.outputs) if d.startswith(("float", "bfloat"))), None)


def why_left_out(info: OpInfo, device: str, dtype: str) -> str | None:
    if not info.fake_kernel:
        return "no FakeTensor kernel: compiled passes cannot trace it"
    if info.needs_device or info.intercept_only:
        return "its kernel cannot run the catalog's samples here"
    if info.kernel_gap(device, dtype) is not None:
        return f"kernel gap on {device} {dtype}"
    if info.nondeterministic or info.scratch_outputs:
        return "its outputs change from call to call"
    return None


def rebuilt(
    sample: Sample, replace: Callable[[int, TensorArg], Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The sample's arguments with its ``i``-th tensor given by ``replace(i, arg)``."""
    counter = iter(range(1 << 30))

    def build(arg: Arg) -> Any:
        if isinstance(arg, TensorArg):
            return replace(next(counter), arg)
        if isinstance(arg, ListArg):
            return [build(a) for a in arg.items]
        if hasattr(arg, "name"):  # DtypeArg
            return dtype_of(arg.name)
        return arg.value

    args = tuple(build(a) for a in sample.args)
    return args, {k: build(v) for k, v in sample.kwargs.items()}


class Menu:
    """The catalogued ops a program on ``device`` under autocast to ``dtype`` can call."""

    def __init__(self, spec: Spec, device: str, dtype: str) -> None:
        self.spec, self.device, self.dtype = spec, device, dtype
        table = spec.device(device)
        by_policy: dict[str, list[OpForm]] = {}
        self.left_out: dict[str, str] = {}
        for op, info in spec.ops.items():
            why = why_left_out(info, device, dtype)
            if why is not None:
                self.left_out[op] = why
                continue
            entry = table.ops.get(op)
            policy = entry.policy_under(dtype) if entry is not None else None
            name = policy.value if policy is not None else UNLISTED
            by_policy.setdefault(name, []).extend(self.forms_of(info, name))
        self.probes: dict[tuple[Any, ...], Probe | None] = {}
        order = [p.value for p in POLICY_ORDER] + [UNLISTED]
        self.by_policy = {p: tuple(sorted(by_policy[p], key=simplicity)) for p in order if by_policy.get(p)}

    def forms_of(self, info: OpInfo, policy: str) -> list[OpForm]:
        forms = []
        for ep in info.entry_points:
            try:
                resolve_entry_point(ep.name)
            except (AttributeError, TypeError):
                continue  # an entry point this release lacks
            forms.append(OpForm(info.op, ep.name, entry_point_sample(ep, info.samples), policy, True))
        forms += [OpForm(info.op, info.op, s, policy, True) for s in info.samples]
        return [dataclasses.replace(f, differentiable=not info.no_derivative) for f in forms]

    @property
    def policies(self) -> tuple[str, ...]:
        """The policies with an op to draw, in the spec's order, ``unlisted`` last."""
        return tuple(self.by_policy)

    def target(self, form: OpForm) -> Callable[..., Any]:
        return op_overload(form.op) if form.entry == form.op else resolve_entry_point(form.entry)

    def probe(self, form: OpForm, inputs: str, state: str | None) -> Probe | None:
        """What ``form`` returns with ``inputs`` (float32 | lower | mixed) under autocast to
        ``state`` on the device (None: autocast off), or None where it raises."""
        key = (form.key, inputs, state)
        if key not in self.probes:
            self.probes[key] = probed(self, form, inputs, state)
        return self.probes[key]

    def resized(self, form: OpForm, fixed: frozenset[int]) -> Probe | None:
        """What ``form`` returns (float32, autocast off) with every slot but ``fixed`` made
        :data:`SCALE` times larger in every dimension, or None where it raises."""
        key = (form.key, "resized", fixed)
        if key not in self.probes:
            self.probes[key] = probed_resized(self, form, fixed)
        return self.probes[key]


def simplicity(form: OpForm) -> tuple[int, int, str]:
    """The order Hypothesis shrinks forms toward: an entry point before the aten overload,
    fewer tensors first."""
    return (int(form.entry == form.op), len(form.slots()), form.op)


def run_form(
    menu: Menu, form: OpForm, make: Callable[[int, TensorArg], torch.Tensor], state: str | None
) -> Probe | None:
    args, kwargs = rebuilt(form.sample, make)
    seen = _SeesComplex()
    try:
        with quiet(), seen:
            if state is None:
                result = menu.target(form)(*args, **kwargs)
            else:
                with raw_autocast(menu.device, dtype_of(state)):
                    result = menu.target(form)(*args, **kwargs)
    except Exception:  # the form does not run so: the strategies do not draw it so
        return None
    leaves = tensors_of(result)
    flat = result if isinstance(result, (tuple, list)) else (result,)
    only = all(isinstance(x, torch.Tensor) for x in flat) and len(leaves) == len(flat)
    given = {t.untyped_storage().data_ptr() for t in tensors_of((args, list(kwargs.values())))}
    fresh = all(t.untyped_storage().data_ptr() not in given for t in leaves)
    shapes = tuple((tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in leaves)
    return Probe(shapes, only, fresh, seen.complex)


class _SeesComplex(TorchDispatchMode):
    """Notes whether any aten op of the call returns a complex tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.complex = False

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.complex = self.complex or any(t.is_complex() for t in tensors_of(out))
        return out


def probed(menu: Menu, form: OpForm, inputs: str, state: str | None) -> Probe | None:
    dtypes = slot_dtypes(form, inputs, menu.dtype)
    if inputs == "mixed" and len(set(dtypes[i] for i in form.float_slots())) < 2:
        return None  # mixed needs two floating tensors

    def make(i: int, arg: TensorArg) -> torch.Tensor:
        return make_tensor(arg.shape, arg.domain, dtype_of(dtypes[i]), i).to(menu.device)

    return run_form(menu, form, make, state)


def probed_resized(menu: Menu, form: OpForm, fixed: frozenset[int]) -> Probe | None:
    def make(i: int, arg: TensorArg) -> torch.Tensor:
        shape = arg.shape if i in fixed else tuple(SCALE * d for d in arg.shape)
        dtype = dtype_of("float32" if arg.is_test_float else arg.dtype)
        return make_tensor(shape, arg.domain, dtype, i).to(menu.device)

    return run_form(menu, form, make, None)


def scaled(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(SCALE * d for d in shape)


MENUS: dict[tuple[int, str, str], tuple[Spec, Menu]] = {}


def menu_for(spec: Spec, device: str, dtype: str) -> Menu:
    """One menu per spec, device and dtype (its probes are cached with it; the spec is held
    with it, so its id names it)."""
    key = (id(spec), device, dtype)
    if key not in MENUS:
        MENUS[key] = (spec, Menu(spec, device, dtype))
    return MENUS[key][1]

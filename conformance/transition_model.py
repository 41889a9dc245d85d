"""The spec's model of what a call receives after any sequence of state changes.

It tracks the thread's autocast state (enabled, dtype, cache flag, nesting), the
grad mode and the weight-cast cache as ``rules.cache`` and ``rules.context``
describe them, and predicts, per tensor of the next call, the dtype it reaches the
kernel in and whether it is the cached cast, a fresh cast or the input itself. The
cast plan comes from the reference policy engine (:func:`reference_impl.policy.decide`,
which reads the device spec and the rules), never from the autocast under test.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from autocast_spec.model import DeviceSpec, Spec
from reference_impl.dtypes import dtype_name
from reference_impl.policy import AutocastState, decide
from reference_impl.samples import Materialized


@dataclass
class Frame:
    """One entered context: an autocast region or a grad mode, with the state it found."""

    kind: str  # "autocast" | "grad"
    saved: tuple[Any, ...]
    ctx: Any = None


@dataclass
class SpecModel:
    spec: Spec
    device_spec: DeviceSpec
    enabled: bool
    dtype: torch.dtype
    cache_flag: bool
    cache_key: str  # rules.cache.key, or what the release does (known_bugs.cache_key)
    grad: str = "grad"  # "grad" | "no_grad" | "inference"
    nesting: int = 0
    frames: list[Frame] = field(default_factory=list)
    # source tensor id (and dtype under key source_and_dtype) -> the cast observed for it
    cache: dict[Any, torch.Tensor] = field(default_factory=dict)
    # every cast any call received (kept alive, so that identity means reuse)
    seen: list[torch.Tensor] = field(default_factory=list)

    @property
    def rules(self) -> Any:
        return self.spec.rules

    def enter_autocast(self, enabled: bool, dtype: torch.dtype | None, cache_enabled: bool | None) -> None:
        self.frames.append(Frame("autocast", (self.enabled, self.dtype, self.cache_flag)))
        self.enabled = enabled
        self.dtype = dtype if dtype is not None else self.dtype
        self.cache_flag = cache_enabled if cache_enabled is not None else self.cache_flag
        self.nesting += 1

    def enter_grad(self, mode: str) -> None:
        self.frames.append(Frame("grad", (self.grad, self.enabled, mode)))
        if mode == "inference":
            self.grad = "inference"
        elif self.grad != "inference":  # no_grad / enable_grad inside inference_mode stay inference
            self.grad = mode

    def exit(self) -> Frame:
        frame = self.frames.pop()
        if frame.kind == "grad":
            if frame.saved[2] == "inference" and self.rules.context.inference_mode_exit_restores_enabled:
                self.enabled = frame.saved[1]
            self.grad = frame.saved[0]
            return frame
        if self.rules.context.nesting_restores_state:
            self.enabled, self.dtype, self.cache_flag = frame.saved
        self.nesting -= 1
        if self.rules.cache.cleared_at == "every_exit" or self.nesting == 0:
            self.cache.clear()
        return frame

    def _key(self, src: torch.Tensor, dtype: torch.dtype) -> Any:
        return (id(src), dtype) if self.cache_key == "source_and_dtype" else id(src)

    def _caching(self) -> bool:
        return self.cache_flag and (self.grad != "inference" or self.rules.cache.in_inference_mode)

    def expect(self, op: str, m: Materialized) -> list[Expected]:
        """Per tensor of the call, in order: what it should arrive as."""
        if not self.enabled:
            return [Expected(t, f"{dtype_name(t.dtype)} uncast") for _, t in m.tensor_paths()]
        state = AutocastState(self.device_spec.device, self.dtype, True)
        plan = decide(self.device_spec, self.rules, state, op, m.args, m.kwargs, self.spec.op_info(op))
        casts = {c.path: c for c in plan.casts}
        out = []
        for path, t in m.tensor_paths():
            c = casts.get(path)
            if c is None:
                out.append(Expected(t, f"{dtype_name(t.dtype)} uncast"))
                continue
            key = self._key(t, c.to_dtype) if c.weight and self._caching() else None
            hit = self.cache.get(key) if key is not None else None
            if hit is not None:
                out.append(Expected(t, f"{dtype_name(hit.dtype)} cached"))
            else:
                out.append(Expected(t, f"{dtype_name(c.to_dtype)} fresh", key))
        return out

    def observe(self, expected: list[Expected], arrived: list[torch.Tensor]) -> list[str]:
        """What arrived, in the model's terms; the casts the rules cache are remembered."""
        out = []
        for e, got in zip(expected, arrived, strict=True):
            if got is e.source:
                out.append(f"{dtype_name(got.dtype)} uncast")
                continue
            cached = any(v is got for v in self.seen)  # a cast received before: reused
            out.append(f"{dtype_name(got.dtype)} {'cached' if cached else 'fresh'}")
            if not cached:
                self.seen.append(got)
            if e.cache_key is not None and not cached:
                self.cache[e.cache_key] = got
        return out


@dataclass
class Expected:
    source: torch.Tensor
    what: str  # "<dtype> uncast" | "<dtype> fresh" | "<dtype> cached"
    cache_key: Any = None  # set when the rules cache this (fresh) cast

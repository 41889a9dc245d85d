"""torch.amp.custom_fwd / custom_bwd on the backend: input casting and the backward's autocast state."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from conformance.target import Target

pytestmark = [
    pytest.mark.custom_function,
    pytest.mark.real_tensors,
    pytest.mark.usefixtures("native_autocast"),
]


def _function(device: str, cast_inputs: torch.dtype | None, log: dict[str, Any]) -> Any:
    class Scale(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type=device, cast_inputs=cast_inputs)
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            log["fwd"] = (x.dtype, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
            return x * 2

        @staticmethod
        @torch.amp.custom_bwd(device_type=device)
        def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
            log["bwd"] = (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
            return g * 2

    return Scale


def test_cast_inputs_casts_and_disables(target: Target, lower: torch.dtype) -> None:
    log: dict[str, Any] = {}
    fn = _function(target.device, torch.float32, log)
    with target.tensors():
        x = torch.ones(4, dtype=lower, device=target.device, requires_grad=True)
        with target.autocast_impl(target.device, dtype=lower):
            y = fn.apply(x)
        y.float().sum().backward()
    assert log["fwd"][0] == torch.float32, f"cast_inputs=float32 gave forward input {log['fwd'][0]}"
    assert log["fwd"][1] is False, "autocast stays enabled inside a custom_fwd(cast_inputs=...) forward"
    assert log["bwd"][0] is False, "custom_bwd did not run backward with the forward's (disabled) state"
    assert x.grad is not None and x.grad.dtype == lower, (
        f"grad dtype {x.grad.dtype if x.grad is not None else None}"
    )


def test_backward_runs_in_forward_state(target: Target, lower: torch.dtype) -> None:
    log: dict[str, Any] = {}
    fn = _function(target.device, None, log)
    with target.tensors():
        x = torch.ones(4, device=target.device, requires_grad=True)
        with target.autocast_impl(target.device, dtype=lower):
            y = fn.apply(x)
        y.float().sum().backward()  # outside the autocast region
    assert log["fwd"][1:] == (True, lower), f"forward saw autocast state {log['fwd'][1:]}"
    assert log["bwd"] == (True, lower), f"custom_bwd ran backward with state {log['bwd']}, not the forward's"

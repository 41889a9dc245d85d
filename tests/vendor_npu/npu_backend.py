"""A simulated vendor backend: PrivateUse1 renamed ``npu``, autocast kernels in Python.

Loaded as a pytest plugin (``-p npu_backend``, with this directory on
PYTHONPATH) before the suite resolves ``--backend npu``. On import it

1. renames PrivateUse1 to ``npu`` and registers a device module (what a real
   vendor extension such as torch_npu does in C++);
2. reads the vendor's device spec (``npu.yaml``: ``extends: cuda`` with declared
   differences) through the project's loader, and registers one autocast kernel
   per listed op at ``AutocastPrivateUse1`` with ``torch.library``, implementing
   that op's policy the way ``autocast_mode.h`` does.

The tensors are FakeTensors of device ``npu`` (the suite's ``--policy-only``):
FakeTensors on a renamed PrivateUse1 device carry the ``AutocastPrivateUse1``
dispatch key, so the kernels run as a real backend's would, without hardware.

Two bugs of this "vendor", declared in ``expectations.yaml``: the promote kernel
of atan2 is unimplemented (raises NotImplementedError), and cosh returns
its result in the lower dtype. Environment switches plant what a vendor must
not ship, for the tests of the tests:

``NPU_SIM_SPEC=path.yaml``, ``NPU_SIM_NAME=tpu``  another vendor's device spec, and its device
                                           name (spec/vendors/torch_npu.yaml, sophgo_torch_tpu.yaml)
``NPU_SIM_DEVIATE=aten::op=policy[,...]``  register ``op`` with another policy than the spec says
``NPU_SIM_ABORT=aten::op``                  the kernel of ``op`` calls ``os.abort()`` once: the
                                           first call with eligible inputs, in any process,
                                           while the file ``NPU_SIM_ABORT_MARKER`` is absent;
                                           before it ends, it writes a native-style message to
                                           file descriptor 2 (as std::terminate does)
``NPU_SIM_NO_AUTOCAST=1``                   a backend without autocast (as torch-rbln 0.12.0):
                                           ``get_amp_supported_dtype()`` returns ``[]``, and no
                                           Autocast kernel or fallthrough is registered
``NPU_SIM_AUTOGRAD_ABORT=aten::op``         a kernel of the vendor's own at AutogradPrivateUse1
                                           for ``op`` that ends the process whenever it is called
                                           (torch_npu registers 131 there; its kernels end the
                                           process where no NPU is found)
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from autocast_spec.model import Policy
from reference_impl.engine.torch_registry import op_overload, split_op_name
from reference_impl.spectools.installed_spec import load_installed_spec

try:  # imported as vendor_npu.npu_backend, or as the plugin npu_backend (this directory on the path)
    from .sim_device_module import stand_in_module
except ImportError:
    from sim_device_module import stand_in_module  # type: ignore[no-redef]

DEVICE = os.environ.get("NPU_SIM_NAME") or "npu"
KEY = "AutocastPrivateUse1"
SPEC_FILE = Path(os.environ.get("NPU_SIM_SPEC") or Path(__file__).with_name("npu.yaml"))
F32 = torch.float32


def _device_module() -> types.ModuleType:
    mod = stand_in_module("torch_npu_sim")
    mod.get_device_name = lambda i=0: "Simulated NPU (FakeTensor)"  # type: ignore[attr-defined]
    amp = [] if os.environ.get("NPU_SIM_NO_AUTOCAST") else [torch.float16, torch.bfloat16]
    mod.get_amp_supported_dtype = lambda: amp  # type: ignore[attr-defined]
    return mod


# ---------------------------------------------------------------------------
# The policies, as autocast_mode.h implements them
# ---------------------------------------------------------------------------


def eligible(v: Any) -> bool:
    return (
        isinstance(v, torch.Tensor)
        and v.is_floating_point()
        and v.dtype != torch.float64
        and v.device.type == DEVICE
    )


def cast(v: Any, dtype: torch.dtype) -> Any:
    if eligible(v) and v.dtype != dtype:
        return v.to(dtype)
    if isinstance(v, (list, tuple)):
        return type(v)(cast(x, dtype) for x in v)
    return v


def any_eligible(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    def walk(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return any(walk(x) for x in v)
        return eligible(v)

    return walk(list(args)) or walk(list(kwargs.values()))


def widest(args: tuple[Any, ...], kwargs: dict[str, Any], lower: torch.dtype) -> torch.dtype:
    """float32 when an eligible input is float32, or when float16 and bfloat16 meet; else ``lower``."""
    seen: set[torch.dtype] = set()

    def walk(v: Any) -> None:
        if isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif eligible(v):
            seen.add(v.dtype)

    walk(list(args))
    walk(list(kwargs.values()))
    return F32 if F32 in seen or {torch.float16, torch.bfloat16} <= seen else lower


def below_autocast() -> Any:
    return torch._C._ExcludeDispatchKeyGuard(
        torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
    )


def make_kernel(
    op: str, policy: Policy, message: str | None = None, append_target: str | None = None
) -> Callable[..., Any]:
    overload = op_overload(op)
    schema = overload._schema

    def kernel(*args: Any, **kwargs: Any) -> Any:
        lower = torch.get_autocast_dtype(DEVICE)
        with below_autocast():
            if policy is Policy.BANNED:
                raise RuntimeError(message or f"{op} is banned in autocast")
            if policy is Policy.LOWER_PRECISION_FP:
                return overload(*cast(args, lower), **cast(kwargs, lower))
            if policy is Policy.FP32:
                return overload(*cast(args, F32), **cast(kwargs, F32))
            if policy is Policy.PROMOTE:
                to = widest(args, kwargs, lower)
                return overload(*cast(args, to), **cast(kwargs, to))
            if policy is Policy.FP32_SET_OPT_DTYPE:
                if args and eligible(args[0]):
                    args, kwargs = _with_dtype(schema, args, kwargs)
                return overload(*args, **kwargs)
            if policy is Policy.FP32_APPEND_DTYPE:
                # Always the dtype overload: float32 for an eligible first argument, else its own dtype.
                assert append_target is not None, f"{op}: the op catalog names no append_dtype_target"
                first = args[0]
                dtype = F32 if eligible(first) else first.dtype
                return op_overload(append_target)(*_positional(schema, args, kwargs), dtype=dtype)
        raise AssertionError(f"unknown policy {policy}")

    return kernel


def _with_dtype(
    schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``dtype=float32`` unless the caller gave one."""
    names = [a.name for a in schema.arguments]
    idx = names.index("dtype")
    if schema.arguments[idx].kwarg_only or idx >= len(args):
        if kwargs.get("dtype") is None:
            kwargs = {**kwargs, "dtype": F32}
        return args, kwargs
    if args[idx] is None:
        args = (*args[:idx], F32, *args[idx + 1 :])
    return args, kwargs


def _positional(schema: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    out = []
    for i, a in enumerate(schema.arguments):
        if a.kwarg_only:
            continue
        out.append(args[i] if i < len(args) else kwargs.get(a.name, a.default_value))
    return out


# ---------------------------------------------------------------------------
# The vendor's two known (declared) bugs, and the plants
# ---------------------------------------------------------------------------


def with_known_bugs(op: str, kernel: Callable[..., Any]) -> Callable[..., Any]:
    name = split_op_name(op)[1]
    if name == "atan2":

        def unimplemented(*args: Any, **kwargs: Any) -> Any:
            if any_eligible(args, kwargs):
                raise NotImplementedError("npu: atan2 autocast kernel is not implemented")
            return kernel(*args, **kwargs)

        return unimplemented
    if name == "cosh":

        def wrong_output_dtype(*args: Any, **kwargs: Any) -> Any:
            out = kernel(*args, **kwargs)
            if any_eligible(args, kwargs):
                with below_autocast():
                    return out.to(torch.get_autocast_dtype(DEVICE))
            return out

        return wrong_output_dtype
    return kernel


NATIVE_MESSAGE = (
    b"terminate called after throwing an instance of 'sim::Error'\n  what():  simulated: no device\n"
)


def end_like_native_code() -> None:
    """What a C++ kernel's uncaught exception does: its message on file descriptor 2, then abort."""
    os.write(2, NATIVE_MESSAGE)
    os.abort()


def aborting_once(kernel: Callable[..., Any], marker: Path) -> Callable[..., Any]:
    """A kernel that calls ``os.abort()`` the first time any process calls it with eligible inputs."""

    def crash(*args: Any, **kwargs: Any) -> Any:
        if any_eligible(args, kwargs) and not marker.exists():
            marker.write_text("aborted once\n")
            end_like_native_code()
        return kernel(*args, **kwargs)

    return crash


def planted_policies() -> dict[str, Policy]:
    out = {}
    for item in filter(None, os.environ.get("NPU_SIM_DEVIATE", "").split(",")):
        op, _, pol = item.partition("=")
        out[op.strip()] = Policy(pol.strip())
    return out


# ---------------------------------------------------------------------------
# Registration (on import)
# ---------------------------------------------------------------------------

_LIBS: list[torch.library.Library] = []


def register() -> int:
    """Rename PrivateUse1, register the device module and one kernel per spec op."""
    if torch._C._get_privateuse1_backend_name() != DEVICE:
        torch.utils.rename_privateuse1_backend(DEVICE)
        torch._register_device_module(DEVICE, _device_module())
    if os.environ.get("NPU_SIM_NO_AUTOCAST"):
        return 0
    spec = load_installed_spec([SPEC_FILE])
    dev = spec.device(DEVICE)
    deviate = planted_policies()
    abort_op = os.environ.get("NPU_SIM_ABORT", "").strip()
    if not torch._C._dispatch_has_backend_fallback(torch._C.DispatchKey.AutocastPrivateUse1):
        # What a vendor's C++ does for every other op: fall through autocast.
        fallback = torch.library.Library("_", "IMPL")
        fallback.fallback(torch.library.fallthrough_kernel, KEY)
        _LIBS.append(fallback)
    libs: dict[str, torch.library.Library] = {}
    for op, entry in dev.ops.items():
        ns, name, ovl = split_op_name(op)
        lib = libs.setdefault(ns, torch.library.Library(ns, "IMPL"))
        info = spec.op_info(op)
        policy = deviate.get(op, entry.policy)
        kernel = make_kernel(op, policy, entry.message, info.append_dtype_target if info else None)
        if op == abort_op:
            kernel = aborting_once(kernel, Path(os.environ["NPU_SIM_ABORT_MARKER"]))
        lib.impl(f"{name}.{ovl}" if ovl else name, with_known_bugs(op, kernel), KEY)
    autograd_abort = os.environ.get("NPU_SIM_AUTOGRAD_ABORT", "").strip()
    if autograd_abort:
        ns, name, ovl = split_op_name(autograd_abort)
        lib = libs.setdefault(ns, torch.library.Library(ns, "IMPL"))
        lib.impl(
            f"{name}.{ovl}" if ovl else name, lambda *a, **k: end_like_native_code(), "AutogradPrivateUse1"
        )
    _LIBS.extend(libs.values())
    return len(dev.ops)


REGISTERED = register()

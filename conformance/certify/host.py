"""The host CPU a certification ran on, for ``environment.json``.

Some kernels accept or refuse inputs depending on the CPU (oneDNN builds its bfloat16
primitives only with AVX-512 or newer), and the suite skips what the kernel refuses
natively. Two bundles are comparable only with the CPU each ran on: its model, the
ISA features that decide such kernels, the capability ATen dispatches to, and the
environment variables that cap either. Where ``/proc/cpuinfo`` is absent (not Linux),
what is known is recorded and the rest says so.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

# The /proc/cpuinfo flags that decide which kernels (ATen's vectorised ones, oneDNN's
# primitives) run on an x86 or Arm CPU.
ISA_FLAGS: tuple[str, ...] = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    "asimd",
    "fphp",
    "asimdhp",
    "bf16",
    "sve",
    "sve2",
)
# Environment variables that cap the ISA oneDNN and ATen use.
ISA_ENV: tuple[str, ...] = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY")
CPUINFO = Path("/proc/cpuinfo")


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """The first processor's model name and its ISA flags (those in :data:`ISA_FLAGS`)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # one processor is enough: the others are alike
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    model = fields.get("model name") or fields.get("cpu model") or fields.get("hardware")
    return {"model": model, "isa_flags": [f for f in ISA_FLAGS if f in flags]}


def host_cpu(
    capability: Callable[[], str], cpuinfo: Path = CPUINFO, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The host CPU: model, relevant ISA flags, torch's CPU capability, ISA caps set in the environment.

    ``capability``: ``torch.backends.cpu.get_cpu_capability``. ``cpuinfo`` and ``env``
    are for tests (defaults: this host).
    """
    env = os.environ if env is None else env
    out: dict[str, Any] = {"machine": platform.machine(), "processor": platform.processor() or None}
    try:
        out.update(parse_cpuinfo(cpuinfo.read_text(encoding="utf-8", errors="replace")))
        out["source"] = str(cpuinfo)
    except OSError as e:
        out.update(model=None, isa_flags=None, source=f"unavailable ({type(e).__name__}: {cpuinfo})")
    try:
        out["torch_cpu_capability"] = str(capability())
    except Exception as e:  # an older torch: say so, never fail the bundle
        out["torch_cpu_capability"] = f"unavailable ({type(e).__name__})"
    out["isa_env"] = {k: env[k] for k in ISA_ENV if k in env}
    return out

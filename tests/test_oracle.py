"""The oracle equals native autocast, bitwise and in dtype, for every op of the cpu spec.

Ops the catalog marks ``nondeterministic`` (their kernel does not repeat
bitwise run to run) are compared in dtype and within the spec's tolerance.
Parametrized from the spec at collection time: every op a device spec lists and
the op catalog (spec/ops/) gives samples for, each sample, each autocast dtype,
with floating inputs in float32 and in the autocast dtype. On a machine with a
GPU the cuda spec is checked the same way.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from reference_impl.engine.dtypes import dtype_name, dtype_of
from reference_impl.engine.oracle import oracle_call
from reference_impl.engine.policy import AutocastState
from reference_impl.harness.compare import output_mismatch
from reference_impl.harness.samples import materialize, op_overload
from reference_impl.spectools.installed_spec import load_installed_spec

SPEC = load_installed_spec()
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _params() -> list[Any]:
    out = []
    for device in DEVICES:
        dspec = SPEC.device(device)
        for op in sorted(dspec.ops):
            info = SPEC.op_info(op)
            for i in range(len(info.samples) if info else 0):
                for dtype in dspec.supported_dtypes:
                    for inputs in ("float32", dtype):
                        out.append(
                            pytest.param(
                                device, op, i, dtype, inputs, id=f"{device}-{op}-{i}-{dtype}-in_{inputs}"
                            )
                        )
    return out


PARAMS = _params()


def _run(fn: Any) -> tuple[Any, BaseException | None]:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(), None
        except Exception as e:  # both sides must fail alike
            return None, e


def repro(device: str, op: str, index: int, dtype: str, inputs: str) -> str:
    return (
        'python -c "import torch; from reference_impl.spectools.installed_spec import load_installed_spec; '
        "from reference_impl.harness.samples import materialize, op_overload, dtype_of; "
        "from reference_impl.engine.oracle import oracle_call; "
        "from reference_impl.engine.policy import AutocastState; "
        f"s=load_installed_spec(); "
        f"m=materialize(s.ops['{op}'].samples[{index}], dtype_of('{inputs}'), '{device}'); "
        f"st=AutocastState('{device}', dtype_of('{dtype}')); "
        f"print(oracle_call(s, st, '{op}', m.args, m.kwargs)); "
        f"ac=torch.autocast('{device}', dtype=st.dtype); ac.__enter__(); "
        f"print(op_overload('{op}')(*m.args, **m.kwargs))\""
    )


@pytest.mark.parametrize("device,op,index,dtype,inputs", PARAMS)
def test_oracle_equals_native_bitwise(device: str, op: str, index: int, dtype: str, inputs: str) -> None:

    info = SPEC.ops[op]
    lower = dtype_of(dtype)
    m = materialize(info.samples[index], dtype_of(inputs), device)
    state = AutocastState(device, lower)

    def native() -> Any:
        with torch.autocast(device, dtype=lower):
            return op_overload(op)(*m.args, **m.kwargs)

    expected, native_err = _run(native)
    actual, oracle_err = _run(lambda: oracle_call(SPEC, state, op, m.args, m.kwargs))
    how = f"\nreproduce: {repro(device, op, index, dtype, inputs)}"
    if native_err or oracle_err:
        assert type(native_err) is type(oracle_err) or (
            isinstance(native_err, RuntimeError) and isinstance(oracle_err, RuntimeError)
        ), f"native raised {native_err!r}, oracle raised {oracle_err!r}{how}"
        assert str(oracle_err).splitlines()[0] in str(native_err), (
            f"error messages differ: native {native_err}, oracle {oracle_err}{how}"
        )
        return
    tolerance = SPEC.tolerance(op, dtype_name(lower)) if info.nondeterministic else None
    problem = output_mismatch(expected, actual, tolerance, info.scratch_outputs)
    assert problem is None, f"{op} {dtype_name(lower)} inputs {inputs}: {problem}{how}"


def test_every_cpu_op_with_samples_is_covered() -> None:
    cpu = SPEC.device("cpu")
    covered = {p.values[1] for p in PARAMS if p.values[0] == "cpu"}
    with_samples = {op for op in cpu.ops if SPEC.op_info(op) and SPEC.op_info(op).samples}  # type: ignore[union-attr]
    assert covered == with_samples

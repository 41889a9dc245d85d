"""The out-of-tree vendor specs (spec/vendors/) and the constructs they need.

Each construct is checked in the policy engine on the vendor file that uses it, with
ops picked by construct (no op name is written here): ``by_dtype`` (IPEX), the
``cast_only_between`` (IPEX), the ``lower_first_arg`` policy and ``cast_cache: false``
(the Habana bridge), and
``env_overrides`` (the Habana bridge's list files) in the loader. The vendor files
load only when named, and the generated matrix blocks are what docs/spec.md and
docs/spec-diff.md hold. The policy-only suite against each vendor spec with
``--implementation reference`` runs in ``test_policy_only_suite_passes`` (slow).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers.suite_runs import run_suite

from autocast_spec.env_overrides import apply_env_overrides
from autocast_spec.files import vendor_spec_dir
from autocast_spec.model import DeviceSpec, Policy, Spec
from autocast_spec.problems import SpecError
from autocast_spec.versions import specifier_contains
from reference_impl.cli import diff as diff_cmd
from reference_impl.cli.vendor_tables import DOCS_MARKERS, SUMMARY_MARKERS, between, docs_block, summary_block
from reference_impl.engine.dtypes import dtype_name
from reference_impl.engine.policy import AutocastState, CastPlan, casts_between, decide
from reference_impl.engine.torch_registry import installed_torch_version, op_exists
from reference_impl.harness.samples import materialize
from reference_impl.spectools.installed_spec import load_installed_spec
from reference_impl.spectools.vendor_matrix import vendor_files

ROOT = Path(__file__).resolve().parents[1]
LOWER = (torch.bfloat16, torch.float16)


def _vendor(stem: str) -> tuple[Spec, DeviceSpec]:
    spec = load_installed_spec([vendor_spec_dir() / f"{stem}.yaml"])
    (ds,) = [d for d in spec.devices.values() if d.provenance]
    return spec, ds


def _plan(spec: Spec, ds: DeviceSpec, op: str, lower: torch.dtype, inputs: torch.dtype) -> CastPlan:
    """The plan for ``op``'s first sample with floating inputs of ``inputs``, on cpu tensors
    (the device's rules, renamed cpu: the engine acts for the device it is named)."""
    info = spec.op_info(op)
    assert info is not None, f"{op}: no samples in spec/ops/"
    m = materialize(info.samples[0], inputs)
    return decide(ds.renamed("cpu"), spec.rules, AutocastState("cpu", lower), op, m.args, m.kwargs, info)


def _where(op: str, ds: DeviceSpec) -> str:
    return f"{op} ({ds.ops[op].loc}), reproduce: autocast-spec list --spec {ds.loc.file}"


# --- by_dtype (IPEX) -----------------------------------------------------------------------


def test_by_dtype_policy_follows_the_lower_dtype() -> None:
    spec, ds = _vendor("ipex")
    # the plan reads the op's schema: IPEX's own ops (torch_ipex::) exist only where IPEX is loaded
    ops = [op for op, e in ds.ops.items() if e.by_dtype and op_exists(op)]
    assert ops, "the IPEX spec has no by_dtype entries of torch's own ops"
    for op in ops:
        for lower in LOWER:
            want = ds.ops[op].policy_under(dtype_name(lower))
            lowered = _plan(spec, ds, op, lower, torch.float32)  # float32 inputs: cast only when lower
            widened = _plan(spec, ds, op, lower, lower)  # lower inputs: cast only when fp32
            assert lowered.policy is want and widened.policy is want, _where(op, ds)
            assert bool(lowered.casts) == (want is Policy.LOWER_PRECISION_FP), f"{_where(op, ds)}: {lowered}"
            assert bool(widened.casts) == (want is Policy.FP32), f"{_where(op, ds)}: {widened}"


def test_by_dtype_is_refused_on_a_banned_entry(tmp_path: Path) -> None:
    f = tmp_path / "dev.yaml"
    f.write_text(
        "kind: device\ndevice: banned_by_dtype\ndispatch_key: AutocastCPU\ntorch: '>=2.0'\n"
        "default_dtype: bfloat16\nsupported_dtypes: [bfloat16]\nops:\n  banned:\n"
        '    - {op: aten::mm, message: "refused", by_dtype: {float16: fp32}}\n',
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as e:
        load_installed_spec([f])
    assert any("'by_dtype' is not for banned ops" in str(p) and p.line == 9 for p in e.value.problems), (
        e.value
    )


def _foreign(lower: torch.dtype) -> torch.dtype:
    """The other lower dtype: a floating input IPEX does not cast under ``lower`` autocast."""
    (other,) = [d for d in LOWER if d != lower]
    return other


@pytest.mark.parametrize("policy", [Policy.LOWER_PRECISION_FP, Policy.FP32])
def test_cast_only_between_leaves_other_pairs_uncast(policy: Policy) -> None:
    spec, ds = _vendor("ipex")
    assert ds.cast_only_between, "the IPEX spec says which dtypes it casts between"
    ops = [
        op
        for op, e in ds.ops.items()
        if e.policy is policy and not e.by_dtype and spec.op_info(op) and op_exists(op)  # in this torch
    ]
    assert ops, f"the IPEX spec lists no {policy} op without by_dtype"
    anywhere = replace(ds, cast_only_between=())
    for op in ops:
        for lower in LOWER:
            foreign = _foreign(lower)  # e.g. float16 under bfloat16 autocast: cast by PyTorch, not IPEX
            plan = _plan(spec, ds, op, lower, foreign)
            assert not plan.casts, (
                f"{_where(op, ds)}: {dtype_name(foreign)} under {dtype_name(lower)}: {plan}"
            )
            assert _plan(spec, anywhere, op, lower, foreign).casts, f"{op}: without the rule it is cast"
            ours = _plan(spec, ds, op, lower, torch.float32 if policy is Policy.LOWER_PRECISION_FP else lower)
            assert ours.casts, f"{_where(op, ds)}: float32 <-> {dtype_name(lower)} is still cast: {ours}"


def test_casts_between_reads_lower_as_the_autocast_dtype() -> None:
    _, ds = _vendor("ipex")
    assert casts_between(ds, "float32", "bfloat16", "bfloat16")
    assert casts_between(ds, "float16", "float32", "float16")
    assert not casts_between(ds, "float16", "float32", "bfloat16")
    assert not casts_between(ds, "float16", "bfloat16", "bfloat16")
    assert not casts_between(ds, "float32", "float16", "bfloat16")  # the target must be listed too
    assert casts_between(replace(ds, cast_only_between=()), "float16", "bfloat16", "bfloat16")


# --- lower_first_arg and cast_cache (the Habana bridge) -------------------------------------


def test_lower_first_arg_casts_the_first_argument_only() -> None:
    spec, ds = _vendor("habana")
    ops = ds.ops_with(Policy.LOWER_FIRST_ARG)
    assert ops
    for op in ops:
        info = spec.op_info(op)
        assert info is not None
        m = materialize(info.samples[0], torch.float32)
        floats = [p for p, t in m.tensor_paths() if t.is_floating_point()]
        plan = _plan(spec, ds, op, torch.bfloat16, torch.float32)
        assert len(floats) > 1, f"{op}: the sample should have more float tensors than the first"
        assert [c.path for c in plan.casts] == [floats[0]], f"{_where(op, ds)}: {plan}"
        assert plan.casts[0].to_dtype == torch.bfloat16


def test_cast_cache_false_marks_no_weight() -> None:
    spec, ds = _vendor("habana")
    op = ds.ops_with(Policy.LOWER_PRECISION_FP)[0]
    info = spec.op_info(op)
    assert info is not None
    m = materialize(info.samples[0], torch.float32)
    for t in m.tensors():
        t.requires_grad_(t.is_floating_point())
    state = AutocastState("cpu", torch.bfloat16)
    off = decide(ds.renamed("cpu"), spec.rules, state, op, m.args, m.kwargs, info)
    on = decide(replace(ds, cast_cache=True).renamed("cpu"), spec.rules, state, op, m.args, m.kwargs, info)
    assert not ds.cast_cache and off.casts and not any(c.weight for c in off.casts), off
    assert any(c.weight for c in on.casts), f"the same call on a caching device marks its weights: {on}"


# --- env_overrides (the Habana bridge's list files) ----------------------------------------


def _names(ops: list[str]) -> str:
    """A list file naming ``ops`` by function name (as the bridge's files do)."""
    return "".join(op.split("::")[1].split(".")[0] + "\n" for op in ops)


def test_env_override_replaces_a_list(tmp_path: Path) -> None:
    _, ds = _vendor("habana")
    lower_var, fp32_var = (o.variable for o in ds.env_overrides)
    moved = ds.ops_with(Policy.FP32)[0]  # an fp32 op named in the lower file goes lower
    kept_first = ds.ops_with(Policy.LOWER_FIRST_ARG)[0]  # a norm named in it stays lower_first_arg
    dropped = ds.ops_with(Policy.LOWER_PRECISION_FP)  # lower ops the file does not name go
    f = tmp_path / "lower.txt"
    f.write_text("# the lower list\n" + _names([moved, kept_first]), encoding="utf-8")
    got = apply_env_overrides(ds, {lower_var: str(f)})
    assert got.policy_of(moved) is Policy.LOWER_PRECISION_FP, got.notes
    assert got.policy_of(kept_first) is Policy.LOWER_FIRST_ARG
    assert not any(got.policy_of(op) for op in dropped if op.split(".")[0] != moved.split(".")[0])
    assert got.ops[moved].loc.file == str(f) and got.notes
    # an op the lower list keeps (it is read first) stays lower under an fp32 file naming it
    f32 = tmp_path / "fp32.txt"
    f32.write_text(_names([dropped[0]]), encoding="utf-8")
    got = apply_env_overrides(ds, {fp32_var: str(f32)})
    assert got.policy_of(dropped[0]) is Policy.LOWER_PRECISION_FP
    assert got.ops_with(Policy.FP32) == ()  # the fp32 list is replaced: nothing it names is free
    assert apply_env_overrides(ds, {}) == ds
    unreadable = apply_env_overrides(ds, {lower_var: str(tmp_path / "missing.txt")})
    assert unreadable.ops == ds.ops and "cannot be read" in unreadable.notes[0]


def test_env_override_applies_when_the_spec_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, ds = _vendor("habana")
    moved = ds.ops_with(Policy.FP32)[0]
    f = tmp_path / "lower.txt"
    f.write_text(_names([moved]), encoding="utf-8")
    monkeypatch.setenv(ds.env_overrides[0].variable, str(f))
    _, loaded = _vendor("habana")
    assert loaded.policy_of(moved) is Policy.LOWER_PRECISION_FP


# --- the files -----------------------------------------------------------------------------


def test_vendor_specs_load_only_when_named(spec: Spec) -> None:
    assert not any(d.provenance for d in spec.devices.values()), "a vendor spec loaded by default"
    for f in vendor_files():
        s, ds = _vendor(f.stem)
        assert not ds.builtin and {"repository", "paths", "revision", "read"} <= set(ds.provenance), f
        # a vendor file is read for its own torch release: the bundled spec of that release
        same = load_installed_spec(torch_version=s.torch_version, check_registry=False)
        others = {n: d for n, d in s.devices.items() if n != ds.device}
        assert others == {n: d for n, d in same.devices.items() if n != ds.device}, (
            f"{f} changed another device"
        )


@pytest.mark.parametrize(
    ("path", "markers", "make"),
    [("docs/spec.md", SUMMARY_MARKERS, summary_block), ("docs/spec-diff.md", DOCS_MARKERS, docs_block)],
)
def test_generated_matrix_is_current(path: str, markers: tuple[str, str], make, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for f in vendor_files():
        for o in _vendor(f.stem)[1].env_overrides:
            monkeypatch.delenv(o.variable, raising=False)
    got = between((ROOT / path).read_text(encoding="utf-8"), markers)
    want = make("2.13")
    assert got == want, (
        f"{path} is out of date: run 'python -m reference_impl.cli.vendor_tables"
        f"{' --ops' if make is docs_block else ''}' and paste it between {markers[0]} and {markers[1]}"
    )


# --- the suite against each vendor spec, on the reference ----------------------------------

RUNS = {
    "torch_xla": (["-p", "sim_device_module"], {"SIM_DEVICE_MODULE": "xla"}),
    "habana": (["-p", "sim_device_module"], {"SIM_DEVICE_MODULE": "hpu"}),
    "ipex": ([], {}),
    "torch_npu": (["-p", "npu_backend"], {"NPU_SIM_NAME": "npu"}),
    "sophgo_torch_tpu": (["-p", "npu_backend"], {"NPU_SIM_NAME": "tpu"}),
    "google_torch_tpu": (["-p", "npu_backend"], {"NPU_SIM_NAME": "tpu"}),
}


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(RUNS))
def test_policy_only_suite_passes(stem: str) -> None:
    plugins, env = RUNS[stem]
    f = vendor_spec_dir() / f"{stem}.yaml"
    _, ds = _vendor(stem)
    if not specifier_contains(ds.torch_versions, installed_torch_version()):
        pytest.skip(f"{f.name} pairs with torch {ds.torch_versions}: certified in its tox env (tox.ini)")
    env = {**env, "NPU_SIM_SPEC": str(f)} if "npu_backend" in plugins else env
    args = [*plugins, "--backend", ds.device, "--spec", str(f),
            "--policy-only", "--implementation", "reference", "--dtype", "all"]  # fmt: skip
    paths = f"{ROOT}:{ROOT / 'tests' / 'vendor_npu'}"
    r = run_suite(*args, plugin_env=env, env_extra={"PYTHONPATH": paths})
    tail = r.stdout[-3000:]
    assert r.returncode == 0 and " passed" in tail and not re.search(r"\b\d+ failed", tail), (
        f"{' '.join(f'{k}={v}' for k, v in env.items())} PYTHONPATH={paths} "
        f"python -m pytest conformance {' '.join(args)}\n{tail}"
    )


def test_diff_shows_dtype_exceptions_and_device_rules() -> None:
    _, ipex = _vendor("ipex")
    cpu = load_installed_spec().devices["cpu"]
    same_base = {op for op, e in ipex.ops.items() if e.by_dtype and cpu.policy_of(op) is e.policy}
    d = diff_cmd.compute("cpu", str(vendor_spec_dir() / "ipex.yaml"))
    moved = {m.op: m.after for m in d.changed}
    assert same_base and all(moved.get(op) == ipex.ops[op].described for op in same_base), moved
    _, hpu = _vendor("habana")
    d = diff_cmd.compute("cuda", str(vendor_spec_dir() / "habana.yaml"))
    rules = {c.key: (c.before, c.after) for c in d.defaults}
    assert rules["cast_cache"] == (True, False)
    d = diff_cmd.compute("cpu", str(vendor_spec_dir() / "ipex.yaml"))
    assert {c.key: c.after for c in d.defaults}["cast_only_between"] == ["float32", "lower"]
    assert rules["env_overrides"] == ([], [o.variable for o in hpu.env_overrides])

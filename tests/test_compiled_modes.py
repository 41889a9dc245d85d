"""--mode compile fails a compiler backend that drops autocast's casts (a planted pass), the
inductor mode's emulated-precision pass an inductor that drops a rounding cast, --mode export
an export that drops the autocast region or a program that runs it disabled, and --mode aoti an
AOTInductor that ignores the autocast region.

A ``-p`` plugin registers a ``torch.compile`` backend, ``dropcast``: AOTAutograd with a
forward compiler that removes every cast to a lower-precision dtype from the graph (the
kind of fusion bug that computes ``op(float32 inputs)`` where eager computes
``op(rounded inputs)``). The batched compile mode must fail the ops it breaks, per op.
Another installs an inductor post-grad pass that moves autocast's input casts to the results
(``round(op(x))`` instead of ``op(round(x))``): the dtypes stay right, only values change, and
the ``emulate_precision_casts`` pass, which holds inductor to eager's bits, must fail.
Two more break export: ``torch.export.export`` inlining the ``wrap_with_autocast`` region's
body (what an importer that inlines the HOP does), and ``ExportedProgram.module()`` running
every region disabled.
Another replaces ``torch._inductor.aoti_compile_and_package`` by one that compiles the
exported program with every autocast region disabled: the package runs the ops uncast.
Another breaks AOTAutograd's partitioner: the backward takes the gradients of the forward's
bfloat16 outputs in float32, and the batched ``mode_gradients`` check must fail the op whose
backward then mixes dtypes, not report it as the known bug of a backward traced under autocast.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.suite_runs import run_planted, run_suite, summary

MODE_TEST = "conformance.test_modes::test_mode_matches_eager[{}]"

DROPCAST = """
import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd

LOWER = (torch.bfloat16, torch.float16)


def _drop_casts(gm, example_inputs):
    for node in list(gm.graph.nodes):
        if node.target is torch.ops.aten._to_copy.default and node.kwargs.get("dtype") in LOWER:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


register_backend(name="dropcast")(aot_autograd(fw_compiler=_drop_casts))
"""


def planted_mode_checks(
    tmp_path: Path, plugin: str, source: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """The per-op mode checks (CPU, bfloat16) with ``source`` planted; the run and its outcomes."""
    p, got = run_planted(
        tmp_path, plugin, source, *("--backend", "cpu", "--dtype", "bfloat16", "-m", "mode_check"), *args
    )
    assert got, summary(p)
    return p, got


def test_a_compiler_that_drops_casts_fails_the_compile_mode(tmp_path: Path) -> None:
    p, got = planted_mode_checks(
        tmp_path,
        "planted_compiler",
        DROPCAST,
        *("--mode", "compile", "--compile-backend", "dropcast"),
        *("-k", "test_mode_matches_eager and (aten::mm- or aten::linear- or aten::relu-)"),
    )
    mm = {k: v for k, v in got.items() if "aten::mm-" in k or "aten::linear-" in k}
    assert len(mm) == 4, mm  # mm and linear, float32 and lower inputs
    # float32 inputs: the dropped cast leaves the op in float32; lower inputs need no cast
    assert all(v == "failure" for k, v in mm.items() if k.endswith("-float32]")), mm
    assert all(v == "passed" for k, v in mm.items() if k.endswith("-lower]")), mm
    assert "gives other output dtypes than eager autocast" in p.stdout, summary(p)
    # the hint names the file a compiler's divergences belong in, with the backend it holds for
    assert "add to spec/compiled.yaml mode_divergences.compile: {op: aten::mm" in p.stdout, summary(p)
    assert "backend: dropcast," in p.stdout, summary(p)


DROP_ROUNDING = """
import torch
import torch._inductor.config as inductor_config
from torch._guards import detect_fake_mode
from torch._inductor.custom_graph_pass import CustomGraphPass
from torch.fx.node import map_arg

LOWER = (torch.bfloat16, torch.float16)
CONVERT = torch.ops.prims.convert_element_type.default


class DropRounding(CustomGraphPass):
    # autocast's input casts dropped and the results cast instead: round(op(x)), not op(round(x))

    def __call__(self, graph):
        dtypes = {n: n.meta["val"].dtype for n in graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)}
        for node in list(graph.nodes):
            if node.target is CONVERT and node.args[1] in LOWER and dtypes.get(node.args[0]) == torch.float32:
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
        out = graph.output_node()
        with detect_fake_mode([n.meta.get("val") for n in graph.nodes]):
            for node in graph.nodes:  # what each node computes now
                if node.op == "call_function":
                    args, kwargs = map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
                    node.meta["val"] = node.target(*args, **kwargs)
            results = []
            for r in out.args[0]:  # each result back in the dtype it had
                if isinstance(r, torch.fx.Node) and r in dtypes and r.meta["val"].dtype != dtypes[r]:
                    with graph.inserting_before(out):
                        cast = graph.call_function(CONVERT, (r, dtypes[r]))
                    cast.meta["val"] = CONVERT(r.meta["val"], dtypes[r])
                    r = cast
                results.append(r)
        out.args = (tuple(results),)

    def uuid(self):
        return "planted-drop-rounding"


inductor_config.post_grad_custom_post_pass = DropRounding()
"""


def test_an_inductor_pass_that_drops_a_rounding_cast_fails_the_emulated_pass(tmp_path: Path) -> None:
    """linalg_vecdot (decomposed: a multiply and a sum) in bfloat16: with float32 inputs the
    pass drops the input casts and rounds the sum; lower inputs have no cast to drop."""
    args = ("--mode", "compile", "--compile-backend", "inductor", "--op", "aten::linalg_vecdot")
    select = ("-k", "test_mode_matches_eager and emulate_precision_casts")
    clean = run_suite("--backend", "cpu", "--dtype", "bfloat16", "-m", "mode_check", *args, *select)
    assert clean.returncode == 0 and "2 passed" in clean.stdout, summary(clean)
    p, got = planted_mode_checks(tmp_path, "planted_rounding", DROP_ROUNDING, *args, *select)
    test = MODE_TEST.format("compile-inductor-emulate_precision_casts-aten::linalg_vecdot-bfloat16-{}")
    assert got == {test.format("float32"): "failure", test.format("lower"): "passed"}, got
    assert "values differ (max abs error 0.0176, bound bitwise)" in p.stdout, summary(p)
    assert "other output dtypes" not in p.stdout, summary(p)  # the dtypes stay right


INLINED_REGION = """
import torch
import torch.export

REAL = torch.export.export


def inline_regions(gm):
    # each wrap_with_autocast(device, dtype, enabled, cache, body, *inputs) replaced by its body
    graph = gm.graph
    for hop in [n for n in graph.nodes if getattr(n.target, "__name__", "") == "wrap_with_autocast"]:
        body = getattr(gm, hop.args[4].target)
        env = dict(zip([n for n in body.graph.nodes if n.op == "placeholder"], hop.args[5:]))
        with graph.inserting_before(hop):
            for n in body.graph.nodes:
                if n.op == "output":
                    results = torch.fx.node.map_arg(n.args[0], lambda x: env[x])
                elif n.op != "placeholder":
                    env[n] = graph.node_copy(n, lambda x: env[x])
        for user in list(hop.users):  # getitem(hop, i)
            user.replace_all_uses_with(results[user.args[1]])
            graph.erase_node(user)
        graph.erase_node(hop)
    graph.eliminate_dead_code()
    gm.recompile()


def stripping(*args, **kwargs):
    ep = REAL(*args, **kwargs)
    inline_regions(ep.graph_module)
    return ep


torch.export.export = stripping
"""

REGIONS_DISABLED = """
import torch
import torch.export

REAL = torch.export.ExportedProgram.module


def ignoring_regions(self, *args, **kwargs):
    gm = REAL(self, *args, **kwargs)
    for m in gm.modules():
        if isinstance(m, torch.fx.GraphModule):
            for n in m.graph.nodes:  # wrap_with_autocast(device, dtype, enabled, ...)
                if getattr(n.target, "__name__", "") == "wrap_with_autocast":
                    n.args = (*n.args[:2], False, *n.args[3:])
            m.recompile()
    return gm


torch.export.ExportedProgram.module = ignoring_regions
"""

EXPORT_MM = ("--mode", "export", "--op", "aten::mm", "-k", "test_mode_matches_eager")


def _failed_export_mm(got: dict[str, str]) -> set[tuple[str, str]]:
    """aten::mm's failed export checks, as (pass, inputs); the four checks must all have run."""
    runs = {
        (pass_, inputs): got.get(MODE_TEST.format(f"{pass_}-aten::mm-bfloat16-{inputs}"), "missing")
        for pass_ in ("export", "export-decomposed")
        for inputs in ("float32", "lower")
    }
    assert set(runs.values()) <= {"passed", "failure"}, got
    return {k for k, v in runs.items() if v == "failure"}


def test_an_export_that_drops_the_autocast_region_fails_the_export_mode(tmp_path: Path) -> None:
    clean = run_suite("--backend", "cpu", "--dtype", "bfloat16", "-m", "mode_check", *EXPORT_MM)
    assert clean.returncode == 0 and "4 passed" in clean.stdout, summary(clean)
    p, got = planted_mode_checks(tmp_path, "planted_export", INLINED_REGION, *EXPORT_MM)
    # no region: the program's outputs are computed outside any HOP (both input kinds), and the
    # op stays float32 with float32 inputs, in ep.module() and after run_decompositions()
    failed = {("export", "float32"), ("export", "lower"), ("export-decomposed", "float32")}
    assert _failed_export_mm(got) == failed, got
    assert "is computed outside any wrap_with_autocast region" in p.stdout, summary(p)
    assert "add to spec/compiled.yaml mode_divergences.export: {op: aten::mm" in p.stdout, summary(p)


def test_a_program_that_runs_its_regions_disabled_fails_the_export_mode(tmp_path: Path) -> None:
    p, got = planted_mode_checks(tmp_path, "planted_module", REGIONS_DISABLED, *EXPORT_MM)
    # the HOP is in the graph as exported, but ep.module() (which run_decompositions() traces
    # too) runs it disabled: float32 inputs stay float32; lower inputs need no cast
    assert _failed_export_mm(got) == {("export", "float32"), ("export-decomposed", "float32")}, got
    assert "add to spec/compiled.yaml mode_divergences.export: {op: aten::mm" in p.stdout, summary(p)
    assert "outside any wrap_with_autocast region" not in p.stdout, summary(p)  # the graph is right


NOREGION = """
import torch
import torch._inductor

REAL = torch._inductor.aoti_compile_and_package


def ignoring_autocast(ep, *args, **kwargs):
    for node in ep.graph.nodes:  # wrap_with_autocast(device, dtype, enabled, cache, body, *inputs)
        if node.op == "call_function" and getattr(node.target, "__name__", "") == "wrap_with_autocast":
            node.args = (*node.args[:2], False, *node.args[3:])
    ep.graph_module.recompile()
    return REAL(ep, *args, **kwargs)


torch._inductor.aoti_compile_and_package = ignoring_autocast
"""


def test_an_aoti_that_ignores_the_autocast_region_fails_the_aoti_mode(tmp_path: Path) -> None:
    p, got = planted_mode_checks(
        tmp_path,
        "planted_aoti",
        NOREGION,
        *("--mode", "aoti", "--op", "aten::mm", "-k", "test_mode_matches_eager"),
    )
    mm = {k: v for k, v in got.items() if "aoti-aten::mm-" in k}
    assert len(mm) == 2, mm  # float32 and lower inputs
    # float32 inputs: no region, no cast, the op stays float32; lower inputs need no cast
    test = "conformance.test_modes::test_mode_matches_eager[aoti-aten::mm-bfloat16-{}]"
    assert mm[test.format("float32")] == "failure", mm
    assert mm[test.format("lower")] == "passed", mm
    assert "aoti (non-strict export, AOTInductor package) gives other output dtypes" in p.stdout, summary(p)
    assert "add to spec/compiled.yaml mode_divergences.aoti: {op: aten::mm" in p.stdout, summary(p)


def test_aoti_without_a_cpp_compiler_is_a_usage_error() -> None:
    p = run_suite(
        *("--backend", "cpu", "--mode", "aoti", "--op", "aten::mm", "-m", "mode_check"),
        env_extra={"CXX": "/nonexistent/c++"},
    )
    assert p.returncode == 2, summary(p)
    line = "usage error: --mode aoti: AOTInductor needs a C++ compiler (set CXX)"
    assert line in p.stdout + p.stderr, summary(p)
    assert "Traceback" not in p.stdout + p.stderr, summary(p)


UPCAST_TANGENTS = """
from pathlib import Path

import torch
import torch._dynamo.backends.debugging as debugging
from torch._functorch import partitioners

LOWER = (torch.bfloat16, torch.float16)
CONVERT = torch.ops.prims.convert_element_type.default
REAL = partitioners.min_cut_rematerialization_partition
LOG = Path(__file__).with_suffix(".tangents")


def upcasting_tangents(joint, inputs, **kwargs):
    # each incoming gradient (tangent) of a lower-dtype output upcast to float32 in the backward
    # graph, where the saved activations stay in the lower dtype
    fw, bw = REAL(joint, inputs, **kwargs)
    tangents = [n for n in bw.graph.nodes if n.op == "placeholder" and n.name.startswith("tangents")]
    for node in tangents:
        if getattr(node.meta.get("val"), "dtype", None) in LOWER:
            with bw.graph.inserting_after(node):
                up = bw.graph.call_function(CONVERT, (node, torch.float32))
            node.replace_all_uses_with(up, delete_user_cb=lambda user: user is not up)
    bw.recompile()
    with LOG.open("a") as log:  # how many ops' gradients each backward graph holds
        log.write(f"{len(tangents)}\\n")
    return fw, bw


partitioners.min_cut_rematerialization_partition = upcasting_tangents
debugging.min_cut_rematerialization_partition = upcasting_tangents  # aot_eager's
"""

GRAD_TEST = "conformance.test_modes::test_mode_gradients_match_eager[grad-{}-bfloat16-region]"


def test_a_backward_that_takes_its_gradients_in_float32_fails_the_batched_gradient_check(
    tmp_path: Path,
) -> None:
    """mm (bfloat16 output: its backward's mm mixes a float32 gradient with a bfloat16 activation)
    and mse_loss (fp32: a float32 output, nothing to upcast) compiled as one batch; the error
    splits it, and mm alone fails, outside the known bug (which observes differing gradients)."""
    args = ("--backend", "cpu", "--dtype", "bfloat16", "--mode", "compile", "-m", "mode_gradients")
    select = ("--op", "aten::mm", "--op", "aten::mse_loss", "-k", "region")
    clean = run_suite(*args, *select)
    assert clean.returncode == 0 and "2 passed" in clean.stdout, summary(clean)
    p, got = run_planted(tmp_path, "planted_tangents", UPCAST_TANGENTS, *args, *select)
    assert got == {GRAD_TEST.format("aten::mm"): "failure", GRAD_TEST.format("aten::mse_loss"): "passed"}, got
    tangents = (tmp_path / "planted_tangents.tangents").read_text().split()
    assert tangents[0] == "2", tangents  # the first backward: both ops' gradients, one batch
    head = "compile (backend aot_eager): gradients (region) differ from eager: aten::mm via aten::mm on cpu"
    assert head in p.stdout, summary(p)
    error = "expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != float"
    assert f"observed: region: compiled raised RuntimeError: {error}" in p.stdout, summary(p)
    assert "-k 'grad-aten::mm-bfloat16-region'" in p.stdout, summary(p)


DROP_FIRST_GRADIENT = """
import torch._dynamo.backends.debugging as debugging
from torch._functorch import partitioners

REAL = partitioners.min_cut_rematerialization_partition


def dropping_first_gradient(joint, inputs, **kwargs):
    # the backward graph returns None for the first input's gradient (a partitioner that loses it)
    fw, bw = REAL(joint, inputs, **kwargs)
    (out,) = [n for n in bw.graph.nodes if n.op == "output"]
    grads = list(out.args[0])
    grads[next(i for i, g in enumerate(grads) if g is not None)] = None
    out.args = (tuple(grads),)
    bw.graph.eliminate_dead_code()
    bw.recompile()
    return fw, bw


partitioners.min_cut_rematerialization_partition = dropping_first_gradient
debugging.min_cut_rematerialization_partition = dropping_first_gradient  # aot_eager's
"""


def test_a_backward_that_drops_a_gradient_fails_not_as_the_known_bug(tmp_path: Path) -> None:
    """The known bug compiled-backward-under-forward-autocast observes gradients whose values
    differ; a compiled backward that loses an input's gradient is another failure, named so."""
    args = ("--backend", "cpu", "--dtype", "bfloat16", "--mode", "compile", "-m", "mode_gradients")
    p, got = run_planted(
        tmp_path, "planted_drop", DROP_FIRST_GRADIENT, *args, "--op", "aten::mm", "-k", "region"
    )
    assert got == {GRAD_TEST.format("aten::mm"): "failure"}, (got, summary(p))
    assert "observed: region: gradient of input 0 missing" in p.stdout, summary(p)

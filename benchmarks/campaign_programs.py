"""A campaign of generated autocast programs through one pass: what differs from eager autocast.

Draws ``--programs`` programs (``reference_impl.programs.programs``, Hypothesis, ``--seed``),
runs each eagerly and through ``--pass`` (``reference_impl.programs.run``) and compares the two
sides roughly: output dtypes, values within the catalog tolerance of the op that made each
output (the rules' default for a residual add), autocast's state after each call, the
gradients' dtypes, the second call, and errors the pass raised where eager ran. This is a
campaign's look, not the suite's verdict (the suite's category judges, with its declarations).

Each kind of difference (its signature) is reported once with how often it was seen; with
``--reduce`` its smallest program is reduced further (``reference_impl.programs.reduce``) and
its script written to ``--out`` (a reproduction: ``python <script>``).

``--part K/N`` runs the K-th of N equal slices of the same draw: a campaign split into parts (over
processes, machines or sessions) whose counts add up to the whole campaign's. Each part draws all
``--programs`` (seconds): a draw of fewer programs is not the start of a draw of more (Hypothesis
scales what it draws with its number of examples).

    python benchmarks/campaign_programs.py --pass inductor --programs 200 --seed 0 --reduce --out DIR
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from conformance.categories.programs import PLAN, Generated, observations, value_gaps
from conformance.kit.case import Case
from conformance.kit.verdict import Observation, known_bug_for, label
from conformance.target import Options, Target, resolve_target
from reference_impl.programs import (
    EAGER_ERROR,
    NOT_APPLICABLE,
    PASSES,
    Program,
    Record,
    ValueGaps,
    run,
    script_for,
    shape_of,
)
from reference_impl.programs.features import features
from reference_impl.programs.passes import pass_named
from reference_impl.programs.reduce import reduce, size
from reference_impl.programs.strategies import drawn_programs
from reference_impl.spectools.installed_spec import load_installed_spec


def close(spec: Any, op: str | None, dtype: str, e: torch.Tensor, g: torch.Tensor) -> bool:
    if e.dtype != g.dtype or e.shape != g.shape:
        return False
    if not (e.is_floating_point() or e.is_complex()):
        return bool(torch.equal(e, g))
    tol = spec.tolerance(op, dtype) if op else spec.rules.default_tolerance.get(dtype)
    atol, rtol = (tol.atol, tol.rtol) if tol else (0.0, 0.0)
    return bool(torch.allclose(g.double(), e.double(), atol=atol, rtol=rtol, equal_nan=True))


def call_differences(spec: Any, r: Record, which: str) -> list[tuple[str, str]]:
    eager, got = getattr(r.eager, which), getattr(r.got, which)
    if eager is None or got is None or eager.error:
        return []
    if got.error:
        return [(f"{which}: error {shape_of(got.error)}", got.error)]
    out = []
    if eager.dtypes != got.dtypes:
        ops = [
            o.op or o.value for o, a, b in zip(r.outputs, eager.dtypes, got.dtypes, strict=False) if a != b
        ]
        out.append((f"{which}: dtypes of {sorted(set(ops))}", f"{eager.dtypes} vs {got.dtypes}"))
    elif which == "first":
        for label, e, g in zip(r.outputs, eager.outputs, got.outputs, strict=False):
            if not close(spec, label.op, r.program.dtype, e, g):
                diff = (e.double() - g.double()).abs().max().item() if e.shape == g.shape else "shape"
                out.append((f"{which}: values of {label.op or 'residual'}", f"{label.value}: {diff}"))
    if eager.state != got.state:
        fields = [
            f
            for f in ("enabled", "dtype", "cache_enabled", "nesting")
            if getattr(eager.state, f) != getattr(got.state, f)
        ]
        out.append((f"{which}: state {fields}", f"{eager.state} vs {got.state}"))
    return out


def differences(spec: Any, r: Record) -> list[tuple[str, str]]:
    """(signature, detail) for each way the pass's side differs from eager's."""
    if r.not_applicable is not None or r.eager is None or r.got is None:
        return []
    if r.status == EAGER_ERROR:  # eager's call raised, or its backward the pass's error
        return []
    if r.got.pass_error:
        return [(f"pass error {shape_of(r.got.pass_error)}", r.got.pass_error)]
    out = call_differences(spec, r, "first")
    if r.gradients_apply and not r.eager.gradients_error and r.got.first and not r.got.first.error:
        if r.got.gradients_error:
            out.append((f"backward error {shape_of(r.got.gradients_error)}", r.got.gradients_error))
        elif r.eager.gradients != r.got.gradients:
            e, g = r.eager.gradients or {}, r.got.gradients or {}
            kinds = sorted(
                {
                    "presence" if (e.get(k) is None) != (g.get(k) is None) else "dtype"
                    for k in {*e, *g}
                    if e.get(k) != g.get(k)
                }
            )
            out.append((f"gradients {kinds}", f"{e} vs {g}"))
    if r.second_not_applicable is None:
        out += call_differences(spec, r, "second")
    return out


def generated_for(pass_name: str) -> Generated:
    """The suite's parameters of the programs category that run ``pass_name``."""
    for (mode, backend), how in PLAN.items():
        for config in how.configs:
            if (g := Generated(mode, backend, config)).pass_name == pass_name:
                return g
    raise SystemExit(f"no case of the programs category runs the pass {pass_name!r}")


class Judge:
    """The suite's verdict on a campaign's programs: each difference from eager, as the programs
    category judges it (conformance/categories/programs.py), with the declarations applied."""

    def __init__(self, pass_name: str) -> None:
        self.generated = generated_for(pass_name)
        self.targets: dict[str, Target] = {}

    def target(self, dtype: str) -> Target:
        if dtype not in self.targets:
            g = self.generated
            options = Options(
                "cpu", dtype, (), None, False, modes=(g.mode.value,), compile_backends=(g.backend,)
            )
            self.targets[dtype] = resolve_target(options)
        return self.targets[dtype]

    def value_gaps(self, program: Program) -> ValueGaps:
        """The suite's check of values, which the runner compares without autocast."""
        return functools.partial(value_gaps, self.target(program.dtype))

    def verdicts(self, r: Record) -> list[str]:
        """``declared <known bug>``, ``within <declared divergence>`` or ``undeclared: <what>``
        for each observation (none: as eager, not applicable, or eager's error)."""
        if r.status in (NOT_APPLICABLE, EAGER_ERROR):
            return []
        target = self.target(r.program.dtype)
        case = Case("programs", "cpu", getattr(torch, r.program.dtype), params=self.generated)
        return [self.verdict(target, obs) for obs in observations(target, case, r)]

    @staticmethod
    def verdict(target: Target, obs: Observation) -> str:
        bug = known_bug_for(target, obs)
        if bug is not None:
            return f"declared {bug.id}"
        if obs.declared is not None and obs.declared.explains(obs.observed):
            return f"within {obs.declared.kind.rstrip(': ')} ({obs.declared.where})"
        return f"undeclared: {obs.what}: {label(obs.observed)[:160]}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pass", dest="pass_name", required=True, choices=sorted(PASSES))
    ap.add_argument("--programs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--part",
        default="1/1",
        metavar="K/N",
        help="run only the K-th of N equal slices of the draw: a campaign in parts whose counts add up",
    )
    ap.add_argument(
        "--only", default="", metavar="I,J,...", help="run only these programs of the draw (by number)"
    )
    ap.add_argument(
        "--judge",
        action="store_true",
        help="also give the suite's verdict on each difference (declared known bug or undeclared)",
    )
    ap.add_argument("--reduce", action="store_true", help="reduce each signature's smallest program")
    ap.add_argument("--reduce-budget", type=int, default=60, help="programs tried per reduction")
    ap.add_argument("--out", type=Path, help="where reduced reproductions are written")
    a = ap.parse_args()
    part = re.fullmatch(r"([1-9][0-9]*)/([1-9][0-9]*)", a.part)
    if part is None or int(part[1]) > int(part[2]) or int(part[2]) > a.programs:
        ap.error(f"--part {a.part}: give K/N with 1 <= K <= N <= --programs, as in --part 1/2")
    k, parts = int(part[1]), int(part[2])
    if a.only and (parts > 1 or not re.fullmatch(r"[0-9]+(,[0-9]+)*", a.only)):
        ap.error(f"--only {a.only!r}: give program numbers, as in --only 386,1503 (not with --part)")
    only = sorted({int(i) for i in a.only.split(",")}) if a.only else []
    if any(i >= a.programs for i in only):
        ap.error(f"--only {a.only}: each number below --programs ({a.programs})")
    judge = Judge(a.pass_name) if a.judge else None
    warnings.filterwarnings("ignore")
    spec = load_installed_spec()
    start = time.perf_counter()
    inference = pass_named(a.pass_name).inference_only  # freezing: inference programs only
    drawn = drawn_programs(spec, a.programs, a.seed, inference_only=inference)
    print(f"drew {len(drawn)} programs in {time.perf_counter() - start:.1f} s", flush=True)
    first, stop = (k - 1) * len(drawn) // parts, k * len(drawn) // parts
    if parts > 1:
        print(f"part {k}/{parts}: programs {first} to {stop - 1} of the draw", flush=True)
    numbers = only or list(range(first, stop))
    statuses: collections.Counter[str] = collections.Counter()
    eager_errors: collections.Counter[str] = collections.Counter()
    seen: dict[str, list[tuple[Program, str]]] = collections.defaultdict(list)
    start = time.perf_counter()
    ran = [drawn[i] for i in numbers]
    judged: collections.Counter[str] = collections.Counter()
    met_by: dict[str, list[int]] = collections.defaultdict(list)
    for i, p in enumerate(ran):
        r = run(p, a.pass_name, spec, value_gaps=judge.value_gaps(p) if judge else None)
        verdicts = judge.verdicts(r) if judge else []
        for v in sorted(set(verdicts)):
            judged[v] += 1
            met_by[v].append(numbers[i])
        if only:
            why = f" ({r.not_applicable.reason[:300]})" if r.not_applicable else ""
            print(f"  program {numbers[i]}: {r.status}{why}; {verdicts}", flush=True)
        statuses[r.status] += 1
        if r.status == "eager_error" and r.eager is not None and r.eager.error:
            eager_errors[shape_of(r.eager.error)] += 1
        for sig, detail in differences(spec, r):
            seen[sig].append((p, detail))
        if (i + 1) % 25 == 0:
            print(
                f"  {numbers[i] + 1} programs, {time.perf_counter() - start:.0f} s, {dict(statuses)}",
                flush=True,
            )
    took = time.perf_counter() - start
    print(f"{a.pass_name}: {len(ran)} programs in {took:.0f} s ({len(ran) / took:.2f}/s): {dict(statuses)}")
    for shape, n in eager_errors.most_common():
        print(f"  eager autocast raised ({n}x): {shape}")
    if judge:
        print("the suite's verdict (programs with each; the programs' numbers):")
        for v, n in sorted(judged.items(), key=lambda kv: (not kv[0].startswith("undeclared"), -kv[1])):
            shown = ", ".join(map(str, met_by[v][:10])) + (", ..." if n > 10 else "")
            print(f"  [{n}x] {v} (programs {shown})")
    for sig, found in sorted(seen.items(), key=lambda kv: -len(kv[1])):
        smallest, detail = min(found, key=lambda pd: size(pd[0]))
        print(f"\n[{len(found)}x] {sig}\n    {detail[:300]}")
        at = next(i for i, q in enumerate(drawn) if q is smallest)
        also = ", inference_only=True" if inference else ""
        print(f"    smallest: drawn_programs(spec, {len(drawn)}, {a.seed}{also})[{at}]")
        if a.reduce:

            def shows(q: Program, sig: str = sig) -> bool:
                return any(s == sig for s, _ in differences(spec, run(q, a.pass_name, spec)))

            smallest = reduce(smallest, shows, budget=a.reduce_budget)
            print(f"    reduced to {size(smallest)[0]} statements: {sorted(features(smallest))}")
        if a.out:
            a.out.mkdir(parents=True, exist_ok=True)
            path = a.out / f"{a.pass_name}-{smallest.id}.py"
            path.write_text(script_for(smallest, a.pass_name, spec))
            print(f"    reproduction: {path}")
    return 0


if __name__ == "__main__":
    # one inductor cache for the whole campaign (a new temporary one unless the caller names one)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="campaign_inductor_"))
    sys.exit(main())

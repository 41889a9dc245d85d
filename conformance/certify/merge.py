"""``autocast-spec merge-bundles OUT IN...``: the shard bundles of one run, merged into one bundle.

Each IN is the bundle of one ``--certify-shard K/N`` run. They are merged only when they are
the shards of one run, all of them, each once (exit 2 with the reasons otherwise):

* each is a finished, unchanged bundle (its manifest matches) and a shard (``shard.json``);
* they agree on what was certified: suite version, spec hash, options, the recorded test
  options (the invocation without how-to-run options), ``-p`` plugins, the expectations
  file, torch's build (version, git revision, CUDA/HIP, build configuration without its
  host-dependent CPU-capability line), the backend and device, the vendor release, the
  number of shards, the cost table and the full run's test list (``collected.json``);
* no test is in two shards, and every test of the full run is in one whose bundle holds
  its result.

Host CPU, OS, Python and the machine may differ between shards (their environments are kept).
OUT is written as an unsharded run writes its bundle: results in collection order, the
verdict overall and per mode recomputed, ``merged_from`` naming the shards; a non-empty OUT
is refused unless ``--overwrite``. ``verify-bundle OUT`` checks it as any bundle.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autocast_spec.problems import SpecError
from reference_impl.cli.common import EXIT_OK, UsageError, write_out
from reference_impl.spectools.installed_spec import load_installed_spec

from . import bundle as B
from .verdict import mode_verdicts, results_verdict

CPU_CAPABILITY = "CPU capability usage:"  # torch.__config__.show()'s line for the host's ISA
REASONS_SHOWN = 12


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "merge-bundles",
        help="merge the shard bundles of one certification run (--certify-shard K/N) into one bundle",
        description="Merge the bundles of the N shards of one certification run into one bundle that "
        "verify-bundle checks like an unsharded run's. Refused (exit 2, with the reasons): shards that "
        "differ in spec, options, torch build, vendor release or backend, shards that overlap, and a "
        "test of the full run that no shard holds.",
    )
    p.add_argument("out", type=Path, metavar="OUT", help="the merged bundle's directory (new or empty)")
    p.add_argument("shards", type=Path, nargs="+", metavar="IN", help="the shard bundles (--certify DIR)")
    p.add_argument("--overwrite", action="store_true", help="replace the contents of a non-empty OUT")
    p.set_defaults(run=run)


@dataclass
class ShardBundle:
    root: Path
    meta: dict[str, Any]
    env: dict[str, Any]
    shard: dict[str, Any]
    collected: list[dict[str, Any]]
    results: list[B.TestResult]

    @property
    def name(self) -> str:
        return f"{self.root} (shard {self.shard.get('index')}/{self.shard.get('count')})"


def read_shard(root: Path) -> ShardBundle:
    if not root.is_dir():
        raise UsageError(f"{root}: no such directory; give the directories written by --certify-shard runs")
    if not (root / B.MANIFEST).is_file():
        raise UsageError(f"{root}: no {B.MANIFEST}; not a certification bundle (or its run did not finish)")
    changed = B.manifest_problems(root)
    if changed:
        raise UsageError(f"{root}: changed after certification ({changed[0]}); certify that shard again")
    if not (root / B.SHARD).is_file():
        raise UsageError(
            f"{root}: not a shard (certified without --certify-shard); "
            "merge-bundles merges the shards of one run"
        )
    try:
        return ShardBundle(
            root,
            B.read_json(root, B.CERTIFICATION),
            B.read_json(root, B.ENVIRONMENT),
            B.read_json(root, B.SHARD),
            list(B.read_json(root, B.COLLECTED)),
            [B.result_from_dict(d) for d in B.read_json(root, B.RESULTS)["tests"]],
        )
    except (KeyError, TypeError) as e:
        raise UsageError(f"{root}: malformed bundle ({e!r} missing or of the wrong type)") from None


def _sha256(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _file_sha256(path: Path) -> str | None:
    return B.sha256_file(path) if path.is_file() else None


def identity(b: ShardBundle) -> dict[str, Any]:
    """What every shard of one run must share; keys name it in a refusal."""
    torch_build = dict(b.env.get("torch", {}))
    config = str(torch_build.get("build_config", ""))
    torch_build["build_config"] = "\n".join(ln for ln in config.splitlines() if CPU_CAPABILITY not in ln)
    device = b.env.get("device", {})
    return {
        "suite version": b.meta.get("suite_version"),
        "bundle format": b.meta.get("bundle_format"),
        "spec": b.meta.get("spec_hash"),
        "options": b.meta.get("options"),
        "test options": b.meta.get("invocation", {}).get("worker_args"),
        "plugins": b.meta.get("plugins"),
        "expectations file": _file_sha256(b.root / B.EXPECTATIONS_COPY),
        "torch build": torch_build,
        "backend": {"type": device.get("type"), "name": device.get("name")},
        "vendor release": b.env.get("vendor"),
        "number of shards": b.shard.get("count"),
        "cost table": b.shard.get("cost_table", {}).get("sha256"),
        "test list": _sha256([t.get("id") for t in b.collected]),
    }


def first_difference(a: Any, b: Any, where: str) -> str | None:
    """``where.key: A vs B`` for the first place two JSON values differ, else None."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(set(a) | set(b)):
            d = first_difference(a.get(k), b.get(k), f"{where}.{k}")
            if d:
                return d
        return None
    if a == b:
        return None
    show = [json.dumps(v)[:120] for v in (a, b)]
    return f"{where}: {show[0]} vs {show[1]}"


def refusals(shards: Sequence[ShardBundle]) -> list[str]:
    """Why these bundles are not the shards of one run, all of them, each once."""
    first, ident = shards[0], identity(shards[0])
    out = []
    for b in shards[1:]:
        other = identity(b)
        for key in ident:
            diff = first_difference(ident[key], other[key], key)
            if diff:
                out.append(f"{b.name} and {first.name} differ in {diff}")
    if out:
        return out  # not one run: which tests overlap or are missing says nothing more
    seen: dict[int, ShardBundle] = {}
    for b in shards:
        k = int(b.shard["index"])
        if k in seen:
            out.append(
                f"{b.root} and {seen[k].root} are both shard {k}/{b.shard['count']}: give each shard once"
            )
        seen[k] = b
    owner: dict[str, ShardBundle] = {}
    for b in shards:
        for i in b.shard["tests"]:
            if i in owner:
                out.append(f"{b.name} and {owner[i].name} overlap: both hold {i}")
                break
            owner[i] = b
    count = int(first.shard["count"])
    missing_shards = sorted(set(range(1, count + 1)) - {int(b.shard["index"]) for b in shards})
    if missing_shards:
        out.append(f"shard(s) {', '.join(f'{k}/{count}' for k in missing_shards)} missing: give every shard")
    unheld = [str(t["id"]) for t in first.collected if t["id"] not in owner]
    if unheld:
        out.append(f"{len(unheld)} test(s) of the full run are in no shard given (e.g. {unheld[0]})")
    for b in shards:
        have = {r.id for r in b.results}
        lost = [i for i in b.shard["tests"] if i not in have]
        if lost:
            out.append(
                f"{b.name}: {len(lost)} of its tests have no result (e.g. {lost[0]}); its run did not "
                "finish: certify that shard again"
            )
    return out


def merged_meta(shards: Sequence[ShardBundle], results: Sequence[B.TestResult]) -> dict[str, Any]:
    first = shards[0]
    copies = [first.root / c for c in first.meta.get("spec_copies", [])]
    try:
        spec = load_installed_spec(copies or None)
    except SpecError as e:
        raise UsageError(f"{first.root}: the bundled spec does not load: {e.problems[0]}") from None
    core = list(first.meta.get("mandatory_core", spec.rules.mandatory_core))
    bugs = [b.id for b in spec.rules.known_bugs]
    meta = {k: v for k, v in first.meta.items() if k not in ("shard", "invocation")}
    meta.update(
        {
            "invocation": {k: first.meta["invocation"][k] for k in ("dir", "worker_args")},
            "counts": B.counts(results),
            "tests": len(results),
            "tests_in_run": len(results),
            "workers": sum(int(b.meta.get("workers", 0)) for b in shards),
            "wall_s": max(float(b.meta.get("wall_s", 0.0)) for b in shards),  # the longest shard
            "verdict": asdict(results_verdict(results, core, bugs)),
            "mode_verdicts": {m: asdict(v) for m, v in mode_verdicts(results, core, bugs).items()},
            "merged_from": [
                {
                    "index": b.shard["index"],
                    "count": b.shard["count"],
                    "bundle": str(b.root),
                    "tests": len(b.results),
                    "wall_s": b.meta.get("wall_s"),
                    "workers": b.meta.get("workers"),
                    "args": b.meta.get("invocation", {}).get("args"),
                    "certification_sha256": B.sha256_file(b.root / B.CERTIFICATION),
                }
                for b in shards
            ],
        }
    )
    return meta


def write_merged(out: Path, shards: Sequence[ShardBundle]) -> dict[str, Any]:
    """Write the merged bundle; its certification record."""
    first = shards[0]
    by_id = {r.id: r for b in shards for r in b.results}
    results = [by_id[str(t["id"])] for t in first.collected]  # collection order, as an unsharded run
    meta = merged_meta(shards, results)
    env = dict(first.env)
    env["shards"] = [{"index": b.shard["index"], **b.env} for b in shards]
    if (first.root / B.SPEC_COPY).is_dir():
        shutil.copytree(first.root / B.SPEC_COPY, out / B.SPEC_COPY)
    if (first.root / B.EXPECTATIONS_COPY).is_file():
        shutil.copyfile(first.root / B.EXPECTATIONS_COPY, out / B.EXPECTATIONS_COPY)
    for b in shards:
        logs = b.root / B.LOGS
        if logs.is_dir():
            shutil.copytree(logs, out / B.LOGS / f"shard-{b.shard['index']}-of-{b.shard['count']}")
    with (out / B.RESULTS_LOG).open("w", encoding="utf-8") as f:
        for b in shards:
            f.write((b.root / B.RESULTS_LOG).read_text(encoding="utf-8"))
    (out / B.COLLECTED).write_text(B.to_json(first.collected), encoding="utf-8")
    (out / B.RESULTS).write_text(B.to_json({"tests": [asdict(r) for r in results]}), encoding="utf-8")
    (out / B.ENVIRONMENT).write_text(B.to_json(env), encoding="utf-8")
    (out / B.JUNIT).write_text(B.render_junit(results, "autocast-conformance"), encoding="utf-8")
    (out / B.SUMMARY).write_text(B.render_summary(results, meta), encoding="utf-8")
    (out / B.CERTIFICATION).write_text(B.to_json(meta), encoding="utf-8")
    B.write_manifest(out)
    return meta


def merge(out: Path, inputs: Sequence[Path], overwrite: bool) -> dict[str, Any]:
    roots = [p.resolve() for p in inputs]
    target = out.resolve()
    for r in roots:
        if target == r or r in target.parents or target in r.parents:
            raise UsageError(f"merge-bundles {out}: OUT must lie outside every shard ({r}); choose another")
    shards = sorted((read_shard(p) for p in inputs), key=lambda b: int(b.shard.get("index", 0)))
    problems = refusals(shards)
    if problems:
        shown = problems[:REASONS_SHOWN]
        more = [f"... and {len(problems) - len(shown)} more"] if len(problems) > len(shown) else []
        raise UsageError("merge-bundles: these are not the shards of one run, each once:", *shown, *more)
    try:
        B.prepare_dir(out, overwrite, "merge-bundles OUT", "--overwrite")
    except B.BundleError as e:
        raise UsageError(str(e)) from None
    return write_merged(out, shards)


def said(verdict: Mapping[str, Any]) -> str:
    return "conformant" if verdict["conformant"] else "NOT conformant: " + "; ".join(verdict["reasons"])


def run(args: argparse.Namespace) -> int:
    meta = merge(args.out, args.shards, args.overwrite)
    c = meta["counts"]
    verdict = meta["verdict"]
    write_out(
        "\n".join(
            [
                f"merged {len(args.shards)} shards into {args.out}: {meta['tests']} tests ("
                + ", ".join(f"{s} {n}" for s, n in c.items() if n)
                + ")",
                "verdict: " + said(verdict),
                *(f"  {m}: {said(v)}" for m, v in meta["mode_verdicts"].items()),
                f"check it with: autocast-spec verify-bundle {args.out}",
            ]
        )
    )
    return EXIT_OK

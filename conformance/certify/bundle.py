"""The certification bundle: what ``--certify DIR`` writes and ``verify-bundle`` reads.

Layout of DIR::

    results.jsonl        one line per finished test, appended as the run goes
    results.json         every test: stable id, status, category, policy, op, note
    collected.json       the test ids collected at certification time, with categories
    certification.json   suite version, spec hash, options, counts, verdict (overall and per mode),
                         stale entries; a shard's index, a merged bundle's shards
    shard.json           a shard's own tests (``--certify-shard K/N``), read by merge-bundles
    environment.json     torch version and build, device, driver, Python, OS, host CPU and ISA
    junit.xml            the same results for CI tools
    summary.md           counts per category and per policy
    expectations.yaml    a copy of the expectations file (when one was given)
    spec/N/...           copies of the spec files given with --spec
    logs/                each xdist worker's log: the tests it started, what ended a lost one
    manifest.json        sha256 of every file above

This module names the files, writes and renders them, and reads them back; the
run that fills them is :mod:`.recorder`, the checks over what was read are
:mod:`.verdict` and :mod:`.verify`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from reference_impl.cli.common import UsageError

from .expectations import FAILING, STATUSES

BUNDLE_FORMAT = 1
MANIFEST = "manifest.json"
RESULTS = "results.json"
RESULTS_LOG = "results.jsonl"
COLLECTED = "collected.json"
CERTIFICATION = "certification.json"
ENVIRONMENT = "environment.json"
JUNIT = "junit.xml"
SUMMARY = "summary.md"
EXPECTATIONS_COPY = "expectations.yaml"
SPEC_COPY = "spec"
LOGS = "logs"
SHARD = "shard.json"


class BundleError(Exception):
    """A bundle directory that cannot be written or read: one line saying why and what to do."""


@dataclass
class TestResult:
    id: str  # stable test id (independent of rootdir and invocation directory)
    status: str
    category: str | None = None
    policy: str | None = None
    op: str | None = None
    dtype: str | None = None
    duration: float = 0.0
    note: str = ""
    expectation: str | None = None  # the entry applied: "waiver 'glob' (file:line)"
    detail: str = ""  # failure text (truncated)
    mode: str = "eager"  # the execution mode the test checks (identity.case_mode)


# ---------------------------------------------------------------------------
# Directory handling
# ---------------------------------------------------------------------------


def prepare_dir(
    path: Path, overwrite: bool, what: str = "--certify", flag: str = "--certify-overwrite"
) -> None:
    """Create DIR, or refuse a non-empty one unless ``overwrite`` (``what``: how the user named it)."""
    if path.exists() and not path.is_dir():
        raise BundleError(f"{what} {path}: exists and is not a directory; choose another path")
    if path.is_dir() and any(path.iterdir()):
        if not overwrite:
            raise BundleError(
                f"{what} {path}: the directory is not empty; choose a new directory "
                f"or add {flag} to replace its contents"
            )
        for child in path.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
    path.mkdir(parents=True, exist_ok=True)


class JsonlWriter:
    """Append-only JSON lines, flushed after each line: a crash loses nothing already written."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._f = path.open("a", encoding="utf-8")

    def write(self, record: Mapping[str, Any]) -> None:
        self._f.write(json.dumps(record, sort_keys=True) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def bundle_files(root: Path) -> list[str]:
    """Every file of the bundle except the manifest, as sorted relative posix paths."""
    manifest = root / MANIFEST
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p != manifest)


def write_manifest(root: Path) -> None:
    files = {rel: sha256_file(root / rel) for rel in bundle_files(root)}
    (root / MANIFEST).write_text(json.dumps({"sha256": files}, indent=1, sort_keys=True) + "\n")


def copy_spec_files(paths: Sequence[str], dest: Path) -> list[str]:
    """Copy each ``--spec`` path (file or directory) to ``dest/N/``; return the new paths."""
    out = []
    for i, p in enumerate(paths):
        src = Path(p)
        target = dest / str(i)
        target.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            for f in sorted(src.rglob("*.yaml")):
                rel = f.relative_to(src)
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, target / rel)
            out.append(target.as_posix())
        else:
            shutil.copyfile(src, target / src.name)
            out.append((target / src.name).as_posix())
    return out


# ---------------------------------------------------------------------------
# Renderings
# ---------------------------------------------------------------------------


def counts(results: Iterable[TestResult]) -> dict[str, int]:
    c = Counter(r.status for r in results)
    return {s: c.get(s, 0) for s in STATUSES}


def render_junit(results: Sequence[TestResult], suite_name: str) -> str:
    c = counts(results)
    failures = sum(c[s] for s in FAILING if s != "crash" and s != "timeout")
    errors = c["crash"] + c["timeout"]
    skipped = c["skip"] + c["not-supported"] + c["waived"] + c["xfail"]
    total_time = sum(r.duration for r in results)
    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        f'<testsuites><testsuite name={quoteattr(suite_name)} tests="{len(results)}" '
        f'failures="{failures}" errors="{errors}" skipped="{skipped}" time="{total_time:.3f}">',
    ]
    for r in results:
        file_part, _, name = r.id.partition("::")
        classname = file_part.removesuffix(".py").replace("/", ".")
        lines.append(
            f"  <testcase classname={quoteattr(classname)} name={quoteattr(name or r.id)} "
            f'time="{r.duration:.3f}">'
        )
        lines.append(
            f'    <properties><property name="status" value={quoteattr(r.status)}/>'
            + (f'<property name="category" value={quoteattr(r.category)}/>' if r.category else "")
            + "</properties>"
        )
        msg = quoteattr(f"{r.status}: {r.note}".strip().rstrip(":"))
        body = escape(r.detail or r.note)
        if r.status in ("fail", "unexpected-pass"):
            lines.append(f"    <failure message={msg}>{body}</failure>")
        elif r.status in ("crash", "timeout"):
            lines.append(f"    <error type={quoteattr(r.status)} message={msg}>{body}</error>")
        elif r.status in ("skip", "not-supported", "waived", "xfail"):
            lines.append(f"    <skipped type={quoteattr(r.status)} message={msg}/>")
        lines.append("  </testcase>")
    lines.append("</testsuite></testsuites>")
    return "\n".join(lines) + "\n"


def _table(title: str, key: str, results: Sequence[TestResult]) -> list[str]:
    shown = [s for s in STATUSES if any(r.status == s for r in results)]
    groups: dict[str, Counter[str]] = {}
    for r in results:
        groups.setdefault(getattr(r, key) or "(none)", Counter())[r.status] += 1
    out = [f"## Per {title}", "", "| " + title + " | total | " + " | ".join(shown) + " |"]
    out.append("|" + "---|" * (len(shown) + 2))
    for g in sorted(groups):
        c = groups[g]
        out.append(f"| {g} | {sum(c.values())} | " + " | ".join(str(c.get(s, 0)) for s in shown) + " |")
    return [*out, ""]


def _dtypes_line(results: Sequence[TestResult], asked: str | None) -> str:
    """The autocast dtypes the tests ran under (from the results), and how they were chosen."""
    ran = sorted({r.dtype for r in results if r.dtype})
    names = ", ".join(f"`{d}`" for d in ran) or "none"
    how = f"--dtype {asked}" if asked else "no --dtype: the device's default"
    return f"dtypes {names} ({how})"


LISTED_IDS = 40  # a bigger group of one reason is listed per test function, with its count


def declared_sections(declared: Sequence[TestResult]) -> list[str]:
    """Every declared exception, grouped by status and reason: each reason once, its tests under
    it (by id, or per test function with the count where more than :data:`LISTED_IDS`)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in declared:
        groups.setdefault((r.status, r.note or "no reason given"), []).append(r.id)
    tally = ", ".join(f"{s} {n}" for s, n in sorted(Counter(r.status for r in declared).items()))
    out = [f"## Declared exceptions ({len(declared)}: {tally})", ""]
    for (status, note), ids in groups.items():
        out += [f"### {status}, {len(ids)} test{'s' if len(ids) > 1 else ''}: {note}", ""]
        if len(ids) <= LISTED_IDS:
            out += [f"- `{i}`" for i in ids] + [""]
            continue
        per_function = Counter(i.split("[", 1)[0] for i in ids)  # every id is in results.json
        out += [f"- `{fn}[...]`: {n}" for fn, n in per_function.items()] + [""]
    return out


def _verdict_text(verdict: Mapping[str, Any]) -> str:
    return f"**{'conformant' if verdict.get('conformant') else 'NOT conformant'}**" + (
        f" ({'; '.join(verdict.get('reasons', []))})" if verdict.get("reasons") else ""
    )


def _run_lines(meta: Mapping[str, Any]) -> list[str]:
    """What part of a run the bundle holds: a shard of one, or the shards merged."""
    shard = meta.get("shard")
    if shard:
        return [
            f"- Shard {shard['index']} of {shard['count']} (--certify-shard): {shard['tests']} of the run's "
            f"{meta.get('tests_in_run')} tests; a certificate is every shard merged "
            "(`autocast-spec merge-bundles OUT SHARD...`)"
        ]
    merged = meta.get("merged_from")
    if merged:
        return [f"- Merged from {len(merged)} shards (`autocast-spec merge-bundles`), one run's every test"]
    return []


def render_summary(results: Sequence[TestResult], meta: Mapping[str, Any]) -> str:
    c = counts(results)
    opts = meta.get("options", {})
    per_mode = meta.get("mode_verdicts", {})
    lines = [
        "# Autocast conformance certification",
        "",
        f"- Verdict: {_verdict_text(meta.get('verdict', {}))}",
        *(f"  - {m}: {_verdict_text(v)}" for m, v in per_mode.items()),
        *_run_lines(meta),
        f"- Backend: `{opts.get('backend')}`, {_dtypes_line(results, opts.get('dtype'))}, "
        f"policy-only: {opts.get('policy_only')}, autocast: {opts.get('implementation', 'native')}",
        f"- Suite {meta.get('suite_version')}, spec hash `{meta.get('spec_hash')}`, "
        f"torch {meta.get('torch_version')}",
        f"- Tests: {len(results)}; " + ", ".join(f"{s} {n}" for s, n in c.items() if n),
        "",
    ]
    lines += _table("mode", "mode", results)
    lines += _table("category", "category", results)
    lines += _table("policy", "policy", results)
    bad = [r for r in results if r.status in FAILING]
    if bad:
        lines += ["## Not passing", ""]
        lines += [f"- `{r.id}`: {r.status}" + (f" ({r.note})" if r.note else "") for r in bad[:200]]
        if len(bad) > 200:
            lines.append(f"- ... and {len(bad) - 200} more (see results.json)")
        lines.append("")
    declared = [r for r in results if r.status in ("waived", "xfail", "not-supported", "skip")]
    if declared:
        lines += declared_sections(declared)
    stale = meta.get("stale_expectations") or []
    if stale:
        lines += ["## Stale expectations (match no test)", ""] + [f"- {s}" for s in stale] + [""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------


def manifest_problems(root: Path) -> list[str]:
    """Files whose sha256 differs from the manifest, and files missing from or added to it."""
    data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    listed: dict[str, str] = data.get("sha256", {})
    present = set(bundle_files(root))
    problems = []
    for rel, digest in sorted(listed.items()):
        if rel not in present:
            problems.append(f"{rel}: listed in {MANIFEST} but missing")
        elif sha256_file(root / rel) != digest:
            problems.append(f"{rel}: sha256 does not match {MANIFEST} (the file was changed)")
    for rel in sorted(present - set(listed)):
        problems.append(f"{rel}: not listed in {MANIFEST} (added after certification)")
    return problems


def read_json(root: Path, name: str) -> Any:
    """A JSON file of a bundle; a usage error (exit 2) naming it when it is missing or unreadable."""
    path = root / name
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path}: missing; {root} is not a complete certification bundle") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{path}: unreadable ({e}); the bundle is damaged") from None


def result_from_dict(d: Mapping[str, Any]) -> TestResult:
    known = {f for f in TestResult.__dataclass_fields__}
    return TestResult(**{k: v for k, v in d.items() if k in known})


def to_json(obj: Any) -> str:
    if isinstance(obj, list):
        obj = [asdict(x) if hasattr(x, "__dataclass_fields__") else x for x in obj]
    return json.dumps(obj, indent=1, sort_keys=True) + "\n"

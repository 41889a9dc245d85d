"""The real-bug corpus (``corpus.yaml``) as data: :data:`ENTRIES`, :data:`BY_ID`.

Shorthands in the YAML selections: ``files: ops`` is every per-op test file (as the
mutants use), ``k: "op:aten::X"`` is every generated test of that op.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from helpers.suite_runs import ROOT, suite_selection
from mutation.catalogue import OP_FILES, op_keyword

CORPUS = Path(__file__).with_name("corpus.yaml")
EXPECTED = ("caught", "missed")
CATEGORIES = {
    "policy",
    "registration",
    "op_policy",
    "promote",
    "cache",
    "context",
    "threads",
    "custom_function",
    "custom_op",
    "autograd",
    "jit",
}


@dataclass(frozen=True)
class Entry:
    id: str  # owner/repo#number
    url: str
    torch: str  # releases that showed it, as reported
    device: str  # where it was reported
    replayed_on: str  # the backend the replay or witness runs on
    category: str
    symptom: str
    replay: str | None = None  # a @replay function of a kind module (realbugs.registry.KINDS)
    witness: str | None = None  # a @witness function of a kind module
    present: Any = None  # the witness's result on the installed torch, when torch still has it
    uncatchable: str | None = None  # why no suite run can see it
    options: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    keyword: str | None = None
    expected: str = "missed"
    check: str | None = None  # for missed entries: the check that would catch it
    known_bug: str | None = None  # present entries: the spec's known_bugs id (rules.yaml) its check reports
    # present entries: the op or region of a spec/compiled.yaml value_divergences entry citing the
    # entry's url, which its check reports (a value difference has no single observed label)
    value_divergence: str | None = None

    @property
    def kind(self) -> str:
        """replay (injected), present (a finding: torch 2.13 shows it) or uncatchable."""
        if self.uncatchable:
            return "uncatchable"
        return "present" if self.replay is None else "replay"

    @property
    def selection(self) -> tuple[str, ...]:
        return suite_selection(self.options, self.files, self.keyword)

    @property
    def slug(self) -> str:
        """The id as an environment-variable and test-id friendly string."""
        return self.id.replace("/", "-").replace("#", "-")


def _entry(raw: dict[str, Any]) -> Entry:
    sel = raw.pop("selection", {}) or {}
    files = sel.get("files", ())
    keyword = sel.get("k")
    if keyword and keyword.startswith("op:"):
        keyword = op_keyword(keyword.removeprefix("op:"))
    device = str(raw.pop("device"))
    return Entry(
        device=device,
        replayed_on=str(raw.pop("replayed_on", device)),
        options=tuple(sel.get("options", ())),
        files=OP_FILES if files == "ops" else tuple(files),
        keyword=keyword,
        **raw,
    )


def load(path: Path = CORPUS) -> tuple[Entry, ...]:
    return tuple(_entry(dict(raw)) for raw in yaml.safe_load(path.read_text(encoding="utf-8")))


ENTRIES = load()
BY_ID = {e.id: e for e in ENTRIES}
BY_SLUG = {e.slug: e for e in ENTRIES}


def spec_known_bugs() -> set[str]:
    """The ids of ``spec/rules.yaml`` ``known_bugs``, all torch releases."""
    rules = yaml.safe_load((ROOT / "spec" / "rules.yaml").read_text(encoding="utf-8"))
    return {b["id"] for b in rules.get("known_bugs") or []}


def spec_value_divergences() -> set[tuple[str, str]]:
    """(op or region, source) of ``spec/compiled.yaml`` ``value_divergences``, all releases."""
    doc = yaml.safe_load((ROOT / "spec" / "compiled.yaml").read_text(encoding="utf-8"))
    return {(d.get("op") or d["region"], d["source"]) for d in doc.get("value_divergences") or []}


def check_corpus(entries: tuple[Entry, ...] = ENTRIES) -> list[str]:
    """Problems with the corpus (empty: fine)."""
    from .registry import registered

    REPLAYS, WITNESSES = registered()

    problems = []
    if len({e.id for e in entries}) != len(entries):
        problems.append("entry ids are not unique")
    for e in entries:
        where = f"{e.id}:"
        if "#" not in e.id or not e.url.startswith("https://github.com/"):
            problems.append(f"{where} id must be owner/repo#number with a github url")
        if e.category not in CATEGORIES:
            problems.append(f"{where} unknown category {e.category!r}")
        if e.kind == "uncatchable":
            if e.replay or e.witness or e.options:
                problems.append(f"{where} an uncatchable entry has no replay, witness or selection")
            continue
        if e.witness not in WITNESSES:
            problems.append(f"{where} witness {e.witness!r} is not a witness (realbugs.registry.KINDS)")
        if e.kind == "replay" and e.replay not in REPLAYS:
            problems.append(f"{where} replay {e.replay!r} is not a replay (realbugs.registry.KINDS)")
        if e.kind == "present" and e.present is None:
            problems.append(f"{where} needs a replay, or present: (what the installed torch shows)")
        if e.expected not in EXPECTED:
            problems.append(f"{where} expected must be one of {EXPECTED}")
        if e.expected == "missed" and not e.check:
            problems.append(f"{where} a missed entry names the check that would catch it")
        if e.kind == "present" and e.expected == "caught" and e.value_divergence is not None:
            if (e.value_divergence, e.url) not in spec_value_divergences():
                problems.append(
                    f"{where} value_divergence must name the op or region of a spec/compiled.yaml "
                    f"value_divergences entry whose source is {e.url}"
                )
        elif e.kind == "present" and e.expected == "caught" and e.known_bug not in spec_known_bugs():
            problems.append(
                f"{where} a bug the installed torch has is caught only as a declared known bug its check "
                f"reports xfail: known_bug must name an id of spec/rules.yaml known_bugs (or "
                f"value_divergence: a declared value divergence citing the entry)"
            )
        if not e.files or not e.options:
            problems.append(f"{where} needs a selection (options and files)")
        problems += [
            f"{where} no such suite file {f}" for f in e.files if not (ROOT / "conformance" / f).exists()
        ]
    return problems

"""A vendor's expectations file: what it declares about its backend, outside the suite.

The file is YAML (read by the project's only YAML reader,
:mod:`autocast_spec.yaml_source`) validated against
``expectations.schema.json``; every problem carries its file and line. The
decisions (which entry applies to a test, what status a test outcome gets) are
pure functions here; the pytest hooks in :mod:`.outcomes` call them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

from autocast_spec.files import bundled_spec_dir
from autocast_spec.problems import SpecError, SpecProblem
from autocast_spec.schema import schema_problems
from autocast_spec.yaml_source import read_yaml

SCHEMA_FILE = "expectations.schema.json"

# The fixed vocabulary of per-test statuses in a certification bundle.
STATUSES: tuple[str, ...] = (
    "pass",
    "fail",
    "not-supported",
    "waived",
    "xfail",
    "unexpected-pass",
    "crash",
    "timeout",
    "skip",
)
# Statuses that make a bundle non-conformant.
# the note of a test the suite itself reports xfail (a known bug the spec declares), then its reason
SUITE_XFAIL = "suite xfail"
FAILING: frozenset[str] = frozenset({"fail", "unexpected-pass", "crash", "timeout"})

KINDS = ("skip", "xfail", "not-supported", "waiver")


@dataclass(frozen=True)
class ExpectedError:
    type: str  # exception class name ("RuntimeError") or dotted ("torch.OutOfMemoryError")
    message: str  # a regular expression searched in str(exception)

    def matches(self, type_names: Sequence[str], text: str) -> bool:
        short = self.type.rsplit(".", 1)[-1]
        if self.type not in type_names and short not in type_names:
            return False
        return re.search(self.message, text) is not None


@dataclass(frozen=True)
class Expectation:
    match: str
    status: str  # one of KINDS
    reason: str
    file: str
    line: int
    error: ExpectedError | None = None
    issue: str | None = None
    devices: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def applies_to_device(self, device: str | None) -> bool:
        return not self.devices or (device is not None and device in self.devices)

    def describe(self) -> str:
        return f"{self.status} {self.match!r} ({self.where})"


@dataclass(frozen=True)
class Expectations:
    file: str
    entries: tuple[Expectation, ...]
    text: str  # the file's bytes as text, copied into the bundle

    def for_test(self, test_id: str, device: str | None) -> Expectation | None:
        """The first entry (in file order) whose glob matches ``test_id`` and covers ``device``."""
        for e in self.entries:
            if e.applies_to_device(device) and glob_matches(e.match, test_id):
                return e
        return None


EMPTY = Expectations("", (), "")


# ---------------------------------------------------------------------------
# Globs over test ids
# ---------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = []
    for ch in pattern:
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def glob_matches(pattern: str, test_id: str) -> bool:
    """``*`` any text, ``?`` one character; everything else literal (test ids hold ``[``)."""
    return _glob_regex(pattern).match(test_id) is not None


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def _friendly(err: jsonschema.ValidationError) -> str:
    schema: dict[str, Any] = err.schema if isinstance(err.schema, dict) else {}
    value: Any = err.validator_value
    where = " > ".join(str(p) for p in err.absolute_path) or "(top level)"
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = sorted(schema.get("properties", {}))
        unknown = sorted(set(err.instance) - set(allowed))
        return f"{where}: unknown key {', '.join(map(repr, unknown))}; allowed: {', '.join(allowed)}"
    if err.validator == "enum":
        return f"{where}: {err.instance!r} is not one of {', '.join(map(str, value))}"
    if err.validator == "const":
        return f"{where}: must be {value!r}"
    if err.validator == "required":
        what = err.message.split(" ")[0]
        status = err.instance.get("status") if isinstance(err.instance, dict) else None
        extra = f" (status {status} needs it)" if status in ("xfail", "waiver") else ""
        return f"{where}: missing {what}{extra}"
    if err.validator == "pattern" and "issue" in err.absolute_path:
        return f"{where}: {err.instance!r} is not an issue URL (http:// or https://)"
    return f"{where}: {err.message}"


def load_expectations(path: Path) -> Expectations:
    """Read and validate ``path``; raise :class:`SpecError` listing every problem (file:line)."""
    doc = read_yaml(path, str(path))  # raises SpecProblem on unreadable files
    probs = schema_problems(doc, bundled_spec_dir() / SCHEMA_FILE, _friendly)
    if probs:
        raise SpecError(probs)
    entries = []
    for i, d in enumerate(doc.data["expectations"]):
        line = doc.line_of(("expectations", i))
        if "error" in d and d["status"] != "xfail":
            probs.append(SpecProblem(doc.file, line, "'error' is only for status xfail"))
        err = d.get("error")
        if err is not None:
            try:
                re.compile(err["message"])
            except re.error as e:
                probs.append(
                    SpecProblem(
                        doc.file,
                        doc.line_of(("expectations", i, "error", "message")),
                        f"error message is not a valid regular expression: {e}",
                    )
                )
        entries.append(
            Expectation(
                match=d["match"],
                status=d["status"],
                reason=d["reason"],
                file=doc.file,
                line=line,
                error=ExpectedError(err["type"], err["message"]) if err else None,
                issue=d.get("issue"),
                devices=tuple(d.get("devices", ())),
            )
        )
    if probs:
        raise SpecError(probs)
    return Expectations(doc.file, tuple(entries), path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------
# Decisions
# ---------------------------------------------------------------------------


def mandatory_violations(
    exp: Expectations,
    tests: Mapping[str, str | None],
    mandatory: Iterable[str],
    device: str | None,
) -> list[SpecProblem]:
    """Entries that would skip, waive or excuse a test of the mandatory core.

    ``tests``: stable test id -> category. Any expectation on a mandatory test is
    refused: the mandatory core must run and pass.
    """
    core = set(mandatory)
    probs = []
    for e in exp.entries:
        if not e.applies_to_device(device):
            continue
        hits = [t for t, cat in tests.items() if cat in core and glob_matches(e.match, t)]
        if hits:
            cats = sorted({c for t in hits if (c := tests[t])})
            probs.append(
                SpecProblem(
                    e.file,
                    e.line,
                    f"{e.status} {e.match!r} matches {len(hits)} test(s) of the mandatory core "
                    f"({', '.join(cats)}; e.g. {hits[0]}): the categories "
                    f"{', '.join(sorted(core))} cannot be skipped, waived or excused; narrow the glob",
                )
            )
    return probs


def stale_entries(exp: Expectations, test_ids: Iterable[str], device: str | None) -> list[Expectation]:
    """Entries for this device that match no collected test."""
    ids = list(test_ids)
    return [
        e
        for e in exp.entries
        if e.applies_to_device(device) and not any(glob_matches(e.match, t) for t in ids)
    ]


def other_device_entries(exp: Expectations, device: str | None) -> list[Expectation]:
    return [e for e in exp.entries if not e.applies_to_device(device)]


@dataclass(frozen=True)
class Failure:
    """What a failing test raised: its exception's class names (MRO) and text."""

    type_names: tuple[str, ...]
    text: str


def status_of(
    outcome: str,
    expectation: Expectation | None,
    failure: Failure | None = None,
    suite_xfail: str | None = None,
) -> tuple[str, str]:
    """The bundle status of one test from its pytest outcome and its expectation.

    ``outcome``: "passed", "failed" or "skipped" (the test as a whole: a failed
    setup or teardown is "failed"); ``suite_xfail``: the suite's own xfail reason (a known
    bug of the spec), None when the suite did not xfail it. Returns (status, note).
    """
    kind = expectation.status if expectation else None
    if kind == "skip":
        return "skip", expectation.reason if expectation else ""
    if kind == "not-supported":
        return "not-supported", expectation.reason if expectation else ""
    if outcome == "skipped":
        if suite_xfail is not None:
            return "xfail", f"{SUITE_XFAIL}: {suite_xfail}" if suite_xfail else SUITE_XFAIL
        why = f": {failure.text.strip()[:300]}" if failure is not None and failure.text.strip() else ""
        return "skip", "skipped by the suite" + why  # with the suite's reason (e.g. a native refusal)
    if kind == "xfail":
        assert expectation is not None and expectation.error is not None
        if outcome == "passed":
            return "unexpected-pass", f"declared xfail at {expectation.where} but the test passed"
        if failure is not None and expectation.error.matches(failure.type_names, failure.text):
            return "xfail", expectation.reason
        got = f"{failure.type_names[0]}: {failure.text[:200]}" if failure and failure.type_names else "?"
        return (
            "fail",
            f"declared xfail at {expectation.where} expects {expectation.error.type} matching "
            f"{expectation.error.message!r}; got {got}",
        )
    if kind == "waiver":
        if outcome == "passed":
            return "pass", f"waiver at {expectation.where} not needed: the test passed" if expectation else ""
        return "waived", f"{expectation.reason} ({expectation.issue})" if expectation else ""
    return ("pass", "") if outcome == "passed" else ("fail", "")

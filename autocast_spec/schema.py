"""JSON Schema validation of a YAML document: one problem per error, at its file and line.

Used by the spec loader (``autocast-spec.schema.json``) and by certification's
expectations file (``expectations.schema.json``). A caller may word some errors
itself (``special``); the rest get the messages below.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from .model import Policy
from .problems import SpecProblem
from .yaml_source import YamlDocument

# A caller's wording of an error, or None for the common one.
Special = Callable[[jsonschema.ValidationError], str | None]


@cache
def validator(schema: Path) -> jsonschema.Draft202012Validator:
    """The validator of the JSON Schema file ``schema`` (read once per process)."""
    return jsonschema.Draft202012Validator(json.loads(schema.read_text(encoding="utf-8")))


def path_text(path: Sequence[str | int]) -> str:
    """``("ops", "fp32", 3)`` -> ``ops > fp32 > 3``."""
    return " > ".join(str(p) for p in path) or "(top level)"


def _no_special(err: jsonschema.ValidationError) -> str | None:
    return None


def message(err: jsonschema.ValidationError, special: Special = _no_special) -> str:
    """One line for ``err``: where in the document, and what is wrong."""
    own = special(err)
    if own is not None:
        return own
    schema: dict[str, Any] = err.schema if isinstance(err.schema, dict) else {}
    where = path_text(list(err.absolute_path))
    inst = err.instance
    if err.validator == "additionalProperties":
        extra = sorted(set(inst) - set(schema.get("properties", {}))) if isinstance(inst, dict) else []
        allowed = sorted(schema.get("properties", {}))
        return f"{where}: unknown key {', '.join(map(repr, extra))}; allowed: {', '.join(allowed)}"
    if err.validator == "required" and (schema.get("title") == "cited" or err.validator_value == ["seen_on"]):
        return (
            f"{where}: a declaration cites its source: add 'source: <public link to the issue, pull "
            "request or documentation>', or 'source: none' with 'seen_on: \"<torch release>\"' (the "
            "observation stays in the entry's reason)"
        )
    if err.validator == "enum":
        choices = ", ".join(str(v) for v in err.validator_value)  # type: ignore[union-attr]
        return f"{where}: {inst!r} is not one of {choices}"
    if err.validator == "pattern":
        desc = schema.get("description")
        return f"{where}: {inst!r} is not valid" + (f" ({desc})" if desc else "")
    if err.validator in ("oneOf", "anyOf") and err.context:
        return message(jsonschema.exceptions.best_match(err.context), special)
    return f"{where}: {err.message}"


# (schema, digest of a document's data) of the documents found valid in this process: a process
# that loads the same spec again (the tests' forked suite runs, a session's second target) skips
# validation, two thirds of a load's time. Only valid data is remembered, so a problem is always
# found again, at its line.
_VALID: set[tuple[Path, str]] = set()


def schema_problems(doc: YamlDocument, schema: Path, special: Special = _no_special) -> list[SpecProblem]:
    """Every error of ``doc`` against the JSON Schema file ``schema``, each at its line, once."""
    key = (schema, hashlib.sha256(repr(doc.data).encode()).hexdigest())  # types kept; never raises
    if key in _VALID:
        return []
    probs = []
    for err in validator(schema).iter_errors(doc.data):
        errs: Iterable[jsonschema.ValidationError] = (
            err.context if err.validator in ("if", "allOf") and err.context else [err]
        )
        for e in errs:
            probs.append(SpecProblem(doc.file, doc.line_of(tuple(e.absolute_path)), message(e, special)))
    seen: set[str] = set()
    unique = []
    for p in probs:
        if str(p) not in seen:
            seen.add(str(p))
            unique.append(p)
    if not unique:
        _VALID.add(key)
    return unique


def spec_wording(err: jsonschema.ValidationError) -> str | None:
    """The spec schema's own wording: unknown policies under ``ops``, unknown dtypes."""
    schema: dict[str, Any] = err.schema if isinstance(err.schema, dict) else {}
    where = path_text(list(err.absolute_path))
    path = list(err.absolute_path)
    allowed = sorted(schema.get("properties", {}))
    if (
        err.validator == "additionalProperties"
        and isinstance(err.instance, dict)
        and path
        and path[-1] == "ops"
        and allowed
        and set(allowed) <= {p.value for p in Policy}
    ):
        extra = sorted(set(err.instance) - set(allowed))
        return f"{where}: unknown policy {', '.join(map(repr, extra))}; known policies: {', '.join(allowed)}"
    pattern = str(schema.get("pattern", ""))
    if err.validator == "pattern" and ("dtype" in pattern or "float16" in pattern):
        return f"{where}: unknown dtype {err.instance!r}"
    return None

"""``#if`` conditions: true, false, or undecidable from the sources alone.

A build decides many conditions (``AT_CUDNN_ENABLED()``, ``defined(USE_ROCM)``): their
macros come from the build system, not from the files read. Where an expression
depends on such a name it is *undecidable* (None) and :mod:`.preprocess` reads every
branch, marking what it finds there with a :class:`Cond`. ``-D NAME[=VALUE]`` on the
command line decides a name as a compiler would.

Of the undecidable conditions one is known to the spec format: a block under exactly
``AT_CUDNN_ENABLED()`` holds only in builds with cuDNN, which a spec entry says as
``build: cudnn`` (:data:`BUILD_FEATURES`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .lexer import Token
from .macros import Expander, MacroTable

# condition text (as spelled in the source) -> the spec's `build:` feature it means
BUILD_FEATURES = {"AT_CUDNN_ENABLED()": "cudnn"}


@dataclass(frozen=True)
class Cond:
    """One undecidable condition a token sits under: ``#if TEXT`` at FILE:LINE, or its negation."""

    text: str
    file: str
    line: int
    negated: bool = False

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}"
        return f"not ({self.text}) [{where}]" if self.negated else f"{self.text} [{where}]"

    @property
    def build(self) -> str | None:
        """The spec's ``build:`` feature this condition means, if any."""
        return None if self.negated else BUILD_FEATURES.get(self.text)


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
Value = int | _Unknown

_INT = re.compile(r"^(0[xX][0-9A-Fa-f']+|0[bB][01']+|[0-9']+)[uUlLzZ]*$")


def _int(text: str) -> Value:
    m = _INT.match(text)
    if not m:
        return UNKNOWN
    digits = m.group(1).replace("'", "")
    if digits[:2] in ("0x", "0X"):
        return int(digits, 16)
    if digits[:2] in ("0b", "0B"):
        return int(digits[2:], 2)
    if len(digits) > 1 and digits[0] == "0":
        return int(digits, 8)
    return int(digits)


def _resolve_defined(tokens: list[Token], table: MacroTable) -> list[Token | Value]:
    """``defined X`` / ``defined(X)`` -> 1 when X is defined here, else undecidable."""
    out: list[Token | Value] = []
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.text in ("defined", "__has_include", "__has_include_next", "__has_cpp_attribute"):
            j = i + 1
            if j < len(tokens) and tokens[j].text == "(":
                depth, k = 0, j
                while k < len(tokens):
                    depth += {"(": 1, ")": -1}.get(tokens[k].text, 0)
                    if depth == 0:
                        break
                    k += 1
                inner = tokens[j + 1 : k]
                i = k + 1
            else:
                inner = tokens[j : j + 1]
                i = j + 1
            name = inner[0].text if len(inner) == 1 and inner[0].kind == "id" else ""
            out.append(1 if t.text == "defined" and table.is_defined(name) else UNKNOWN)
            continue
        out.append(t)
        i += 1
    return out


def evaluate(tokens: list[Token], table: MacroTable) -> bool | None:
    """True, False, or None where the sources do not decide it."""
    items = _resolve_defined(tokens, table)
    expander = Expander(table)
    expanded: list[Token | Value] = []
    run: list[Token] = []
    for it in [*items, None]:
        if isinstance(it, Token):
            run.append(it)
            continue
        expanded.extend(expander.expand(run))
        run = []
        if it is not None:
            expanded.append(it)
    atoms: list[Value | str] = []
    i = 0
    while i < len(expanded):
        it = expanded[i]
        if not isinstance(it, Token):
            atoms.append(it)
        elif it.kind == "num":
            atoms.append(_int(it.text))
        elif it.kind == "chr":
            body = it.text[it.text.index("'") + 1 : -1]
            atoms.append(ord(body) if len(body) == 1 else UNKNOWN)
        elif it.kind == "id":
            if it.text in ("true", "false"):
                atoms.append(1 if it.text == "true" else 0)
            else:
                atoms.append(UNKNOWN)
                if i + 1 < len(expanded) and getattr(expanded[i + 1], "text", None) == "(":
                    depth = 0  # an unknown function-like name: NAME(...) is one unknown value
                    while i + 1 < len(expanded):
                        i += 1
                        depth += {"(": 1, ")": -1}.get(getattr(expanded[i], "text", ""), 0)
                        if depth == 0:
                            break
        else:
            atoms.append(it.text)
        i += 1
    try:
        value, rest = _ternary(atoms)
    except (IndexError, ValueError, ZeroDivisionError):
        return None
    if rest:
        return None
    return None if isinstance(value, _Unknown) else bool(value)


# --- a small precedence-climbing evaluator over ints and UNKNOWN ------------------------

_BINARY: list[tuple[str, ...]] = [
    ("||",),
    ("&&",),
    ("|",),
    ("^",),
    ("&",),
    ("==", "!="),
    ("<", ">", "<=", ">="),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/", "%"),
]


def _apply(op: str, a: Value, b: Value) -> Value:
    if op == "&&":
        if a == 0 or b == 0:
            return 0
        return UNKNOWN if UNKNOWN in (a, b) else 1
    if op == "||":
        if (a != 0 and not isinstance(a, _Unknown)) or (b != 0 and not isinstance(b, _Unknown)):
            return 1
        return UNKNOWN if UNKNOWN in (a, b) else 0
    if isinstance(a, _Unknown) or isinstance(b, _Unknown):
        return UNKNOWN
    return {
        "|": lambda: a | b, "^": lambda: a ^ b, "&": lambda: a & b,
        "==": lambda: int(a == b), "!=": lambda: int(a != b), "<": lambda: int(a < b),
        ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
        "<<": lambda: a << b, ">>": lambda: a >> b, "+": lambda: a + b, "-": lambda: a - b,
        "*": lambda: a * b, "/": lambda: int(a / b), "%": lambda: a % b,
    }[op]()  # fmt: skip


def _ternary(atoms: list[Value | str]) -> tuple[Value, list[Value | str]]:
    cond, rest = _binary(atoms, 0)
    if rest and rest[0] == "?":
        yes, rest = _ternary(rest[1:])
        if not rest or rest[0] != ":":
            raise ValueError("':' expected")
        no, rest = _ternary(rest[1:])
        if isinstance(cond, _Unknown):
            return (yes if yes == no else UNKNOWN), rest
        return (yes if cond else no), rest
    return cond, rest


def _binary(atoms: list[Value | str], level: int) -> tuple[Value, list[Value | str]]:
    if level == len(_BINARY):
        return _unary(atoms)
    left, rest = _binary(atoms, level + 1)
    while rest and isinstance(rest[0], str) and rest[0] in _BINARY[level]:
        op = rest[0]
        right, rest = _binary(rest[1:], level + 1)
        left = _apply(op, left, right)
    return left, rest


def _unary(atoms: list[Value | str]) -> tuple[Value, list[Value | str]]:
    head = atoms[0]
    if head in ("!", "~", "-", "+"):
        v, rest = _unary(atoms[1:])
        if isinstance(v, _Unknown):
            return UNKNOWN, rest
        return {"!": int(not v), "~": ~v, "-": -v, "+": v}[str(head)], rest
    if head == "(":
        v, rest = _ternary(atoms[1:])
        if not rest or rest[0] != ")":
            raise ValueError("')' expected")
        return v, rest[1:]
    if isinstance(head, str):
        raise ValueError(f"unexpected {head!r}")
    return head, atoms[1:]

"""What lies outside the ``TORCH_LIBRARY_IMPL`` blocks of a unit: a registration there, or a
'}' that closes nothing, is a problem (a stray '}' in a block ends it early, and C++ would not
compile the registrations after it): never registrations dropped in silence."""

from __future__ import annotations

from dataclasses import dataclass

from .forms import is_registration_macro
from .lexer import Token, spell
from .macros import collect_args
from .preprocess import Problem


def short_text(tokens: list[Token], limit: int = 120) -> str:
    """The tokens spelled, cut at ``limit`` characters."""
    s = spell(tokens)
    return s if len(s) <= limit else s[: limit - 3] + "..."


@dataclass(frozen=True)
class Span:
    """A ``TORCH_LIBRARY_IMPL(...) { ... }`` block of a unit: its tokens ``start`` to ``close`` (its '}')."""

    start: int
    close: int
    spelled: str  # its arguments
    var: str | None  # its library variable


def registration_at(toks: list[Token], k: int, var: str | None) -> bool:
    """A registration macro call, or ``var.impl(`` / ``var.fallback(``, starts at ``k``."""
    t = toks[k]
    if t.kind != "id" or k + 1 >= len(toks):
        return False
    if toks[k + 1].text == "(" and is_registration_macro(t.text):
        return True
    return (
        var is not None
        and t.text == var
        and k + 3 < len(toks)
        and toks[k + 1].text == "."
        and toks[k + 2].text in ("impl", "fallback")
        and toks[k + 3].text == "("
    )


def opens_namespace(toks: list[Token], k: int) -> bool:
    """The '{' at ``k`` opens ``namespace [a::b] {``, ``inline namespace``, or ``extern "C" {``."""
    j = k - 1
    while j >= 0 and (toks[j].kind == "id" or toks[j].text == "::") and toks[j].text != "namespace":
        j -= 1
    if j >= 0 and toks[j].text == "namespace":
        return True
    return k >= 2 and toks[k - 2].text == "extern" and toks[k - 1].kind == "str"


def check_outside(toks: list[Token], spans: list[Span], problems: list[Problem]) -> None:
    """Registrations at namespace scope, and '}' that close nothing: never dropped in silence.

    A '}' inside a block (a stray one) ends it early: the registrations after it then stand at
    namespace scope, where C++ would not compile them. The '}' that ended the block is then the
    problem, once per block; a registration at namespace scope before any block, or a '}' that
    closes nothing (at no undecided #if), is one of its own. Registrations in a function's body
    are left to the block that calls the function (a call extract does not know is a problem).
    """
    blamed: set[int] = set()
    scopes: list[bool] = []  # per open '{' outside the blocks: does it open a namespace?
    unmatched: list[Token] = []
    s = 0
    k = 0
    while k < len(toks):
        while s < len(spans) and spans[s].close < k:
            s += 1
        if s < len(spans) and spans[s].start <= k:
            k = spans[s].close + 1
            continue
        t = toks[k]
        if t.kind == "punct" and t.text in "{}":
            if t.text == "{":
                scopes.append(opens_namespace(toks, k))
            elif scopes:
                scopes.pop()
            elif not t.conds:
                unmatched.append(t)
        prev = spans[s - 1] if s > 0 else None
        if all(scopes) and registration_at(toks, k, prev.var if prev else None):
            got = collect_args(toks, k + (3 if toks[k + 1].text == "." else 1))
            stmt = short_text(toks[k : got[1] if got else k + 6], 80)
            if prev is None:
                problems.append(
                    Problem(
                        t.where, f"a registration outside any TORCH_LIBRARY_IMPL block (not read): {stmt}"
                    )
                )
            elif prev.close not in blamed:
                blamed.add(prev.close)
                problems.append(
                    Problem(
                        toks[prev.close].where,
                        f"this '}}' ends the block TORCH_LIBRARY_IMPL({prev.spelled}) opened at line "
                        f"{toks[prev.start].line}, and registrations follow it outside any block ({stmt} "
                        f"at line {t.line}): a stray '}}' in the block? (the registrations after it are "
                        "not read)",
                    )
                )
        k += 1
    if not blamed:
        problems += [
            Problem(t.where, "this '}' closes nothing: the braces before it do not balance")
            for t in unmatched
        ]

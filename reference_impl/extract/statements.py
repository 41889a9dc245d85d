"""Ordinary C++ statements in a registration block, which register nothing.

A vendor's ``TORCH_LIBRARY_IMPL`` block may hold, beside its registrations,
``using namespace at;``, ``using at::Tensor;``, ``using Alias = T;``, ``typedef``\\ s,
``static_assert(...)``, local declarations (``constexpr auto kDtype = at::kHalf;``,
``std::vector<int> v{1, 2};``) and empty statements; comments never reach here
(the lexer drops them). Such a statement is skipped with no effect, but only when it
does not mention the block's library variable, a registration macro or
``TORCH_LIBRARY_IMPL``: anything that could register stays a problem for
:mod:`.registrations` to report.
"""

from __future__ import annotations

from .forms import TORCH_API, is_registration_macro
from .lexer import Token

# leading decl-specifiers a local declaration may carry
_SPECIFIERS = frozenset(
    {"const", "constexpr", "static", "inline", "volatile", "thread_local", "register", "mutable", "constinit"}
)
# statements that start with a name but declare nothing: never skipped
_NOT_DECLARATION = frozenset(
    {"return", "goto", "throw", "delete", "new", "if", "else", "for", "while", "do", "switch", "case",
     "default", "break", "continue", "try", "catch", "co_return", "co_yield", "co_await", "asm"}
)  # fmt: skip
# what may stand between a declaration's type and its name
_TYPE_PUNCT = frozenset({"::", "<", ">", ">>", ",", "*", "&", "&&"})


def _statement_end(body: list[Token], p: int) -> int | None:
    """The index after the ';' that ends the statement starting at ``p`` (brackets nest)."""
    depth = 0
    for k in range(p, len(body)):
        x = body[k].text
        if x in ("(", "[", "{"):
            depth += 1
        elif x in (")", "]", "}"):
            depth -= 1
            if depth < 0:
                return None
        elif x == ";" and depth == 0:
            return k + 1
    return None


def _may_register(stmt: list[Token], var: str) -> bool:
    return any(
        t.kind == "id" and (t.text == var or t.text in TORCH_API or is_registration_macro(t.text))
        for t in stmt
    )


def _is_declaration(stmt: list[Token]) -> bool:
    """``[specifiers] type name [= init | {init} | (init) | [N]];``: a type and a name, no call."""
    k = 0
    while k < len(stmt) and stmt[k].text in _SPECIFIERS:
        k += 1
    head: list[Token] = []
    for t in stmt[k:]:
        if t.text in ("=", "{", "(", "[", ";"):
            break
        head.append(t)
    ids = [t for t in head if t.kind == "id"]
    if len(ids) < 2 or head[0].kind != "id" or head[-1].kind != "id" or head[0].text in _NOT_DECLARATION:
        return False
    return all(t.kind == "id" or t.kind == "num" or t.text in _TYPE_PUNCT for t in head)


def ordinary_statement(body: list[Token], p: int, var: str) -> int | None:
    """The index after the ordinary statement at ``p``, when it is one to skip; else None."""
    end = _statement_end(body, p)
    if end is None:
        return None
    stmt = body[p:end]
    if _may_register(stmt, var):
        return None
    first = stmt[0].text
    if first in ("using", "typedef") or (first == "static_assert" and len(stmt) > 1 and stmt[1].text == "("):
        return end
    return end if _is_declaration(stmt) else None

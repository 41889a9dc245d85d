"""``TORCH_LIBRARY_IMPL`` blocks of the Autocast keys, read statement by statement.

Each statement in a block must be a form :mod:`.forms` knows; anything else is a
problem naming the file, the line and the text. A kernel registered as a function
(``TORCH_FN(fn)``) is looked up in the sources: a body that only raises makes the op
``banned`` with that message; any other body is a kernel of its own whose policy
cannot be read, and the op is listed apart with the reason (never given a policy).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autocast_spec.model import Policy, SourceForms

from .conditions import Cond
from .forms import (
    ByDtype,
    Form,
    FormError,
    device_of_key,
    impl_call,
    is_registration_macro,
    kernel_macro,
    split_args,
)
from .lexer import Token, spell, string_value
from .macros import collect_args
from .outside import short_text
from .preprocess import Problem, Unit
from .statements import ordinary_statement

_RAISES = {"AT_ERROR": 0, "TORCH_CHECK": 1, "TORCH_CHECK_NOT_IMPLEMENTED": 1, "TORCH_INTERNAL_ASSERT": 1}
_MACRO_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


@dataclass(frozen=True)
class Registration:
    """One op registered on an Autocast key."""

    key: str  # the block's dispatch key: AutocastCUDA, AutocastPrivateUse1, ...
    op: str
    policy: Policy | None  # None: registered, but its policy cannot be read (see reason)
    where: str
    conds: tuple[Cond, ...] = ()
    message: str | None = None  # banned ops
    reason: str | None = None
    fallthrough: bool = False  # m.impl(op, makeFallthrough()): registered, not autocast
    by_dtype: ByDtype = ()  # a vendor's policy per dtype, where it differs from ``policy``


@dataclass(frozen=True)
class Fallback:
    """``m.fallback(makeFallthrough())`` in ``TORCH_LIBRARY_IMPL(_, <key>, m)``."""

    key: str
    where: str
    conds: tuple[Cond, ...] = ()


@dataclass
class Found:
    registrations: list[Registration] = field(default_factory=list)
    fallbacks: list[Fallback] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)  # the Autocast keys with a block


def _conds(tokens: list[Token]) -> tuple[Cond, ...]:
    seen: dict[Cond, None] = {}
    for t in tokens:
        for c in t.conds:
            if isinstance(c, Cond):
                seen[c] = None
    return tuple(seen)


class Functions:
    """Function definitions in the units read: name -> (where, body tokens)."""

    def __init__(self, units: list[Unit]) -> None:
        self.units = units

    def find(self, name: str, first: Unit) -> tuple[str, list[Token]] | None:
        for unit in [first, *(u for u in self.units if u is not first)]:
            toks = unit.tokens
            for k, t in enumerate(toks):
                if t.text != name or k + 1 >= len(toks) or toks[k + 1].text != "(":
                    continue
                got = collect_args(toks, k + 1)
                if got is None:
                    continue
                j = got[1]
                while j < len(toks) and toks[j].text not in ("{", ";", "}", ","):
                    j += 1  # const, noexcept, override, a trailing return type
                if j < len(toks) and toks[j].text == "{":
                    return t.where, braced(toks, j)
        return None


def braced(toks: list[Token], open_at: int) -> list[Token]:
    depth = 0
    for k in range(open_at, len(toks)):
        depth += {"{": 1, "}": -1}.get(toks[k].text, 0)
        if depth == 0:
            return toks[open_at + 1 : k]
    return toks[open_at + 1 :]


def raised_message(body: list[Token]) -> tuple[str | None, str]:
    """(message, "") when the body's first statement raises unconditionally; else (None, why not)."""
    if not body:
        return None, "its body is empty"
    head = body[0]
    if head.text == "throw":
        k = next((i for i, t in enumerate(body) if t.text == "("), None)
        got = collect_args(body, k) if k is not None else None
        args = got[0] if got else []
    elif head.text in _RAISES and len(body) > 1 and body[1].text == "(":
        got = collect_args(body, 1)
        if got is None:
            return None, "its first statement is cut short"
        args = split_args([t for a in got[0] for t in (*a, Token("punct", ",", head.file, head.line))][:-1])
        if _RAISES[head.text]:
            if not args or spell(args[0]) not in ("false", "0"):
                return None, f"{head.text} checks a condition ({short_text(args[0] if args else [])})"
            args = args[1:]
    else:
        return None, "its body does more than raise"
    parts = [t for a in args for t in a]
    if not parts or any(t.kind != "str" for t in parts):
        return None, "its message is not made only of string literals"
    return "".join(string_value(t) for t in parts), ""


class Block:
    def __init__(
        self,
        unit: Unit,
        found: Found,
        functions: Functions,
        head: tuple[str, str, str],  # namespace, key, the block's variable
        forms: SourceForms | None,
    ):
        self.unit, self.found, self.functions, self.forms = unit, found, functions, forms
        self.namespace, self.key, self.var = head

    def problem(self, at: Token, message: str) -> None:
        self.found.problems.append(Problem(at.where, message))

    def read(self, body: list[Token]) -> None:
        p = 0
        while p < len(body):
            t = body[p]
            nxt = body[p + 1].text if p + 1 < len(body) else ""
            if t.text == ";":
                p += 1
                continue
            if t.kind == "id" and nxt == "(" and is_registration_macro(t.text):
                got = self.call(body, p, p + 1, t.text)
                if got is None:
                    return
                end = got[1]
                try:
                    self.record(kernel_macro(t.text, got[0], t), body[p:end], t)
                except FormError as e:
                    self.problem(e.at, f"{e.message}: {short_text(body[p:end])}")
                p = end
                continue
            call = body[p + 2].text if p + 3 < len(body) and body[p + 3].text == "(" else ""
            if t.text == self.var and nxt == "." and call in ("impl", "fallback"):
                got = self.call(body, p, p + 3, f"{self.var}.{call}")
                if got is None:
                    return
                end = got[1]
                self.method(call, got[0], body[p:end], t)
                p = end
                continue
            skip = ordinary_statement(body, p, self.var)
            p = skip if skip is not None else self.not_understood(body, p)

    def call(
        self, body: list[Token], start: int, open_at: int, name: str
    ) -> tuple[list[list[Token]], int] | None:
        """The arguments of the call at ``start`` whose '(' is at ``open_at``; None (a problem) when
        its ')' is missing: what follows cannot be read as statements."""
        got = collect_args(body, open_at)
        if got is None:
            self.problem(
                body[start],
                f"unbalanced call: {name}( has no closing ')' before the block ends "
                f"(the registrations after it are not read): {short_text(body[start : open_at + 6])}",
            )
        return got

    def not_understood(self, body: list[Token], p: int) -> int:
        t = body[p]
        if t.kind == "id" and p + 1 < len(body) and body[p + 1].text == "(":
            got = collect_args(body, p + 1)
            end = got[1] if got else len(body)
            if end < len(body) and body[end].text == "{":  # for (...) { ... }: one statement
                end += len(braced(body, end)) + 2
            hint = (
                f"; no #define of {t.text} was found in the files read (pass the file that defines it)"
                if _MACRO_NAME.match(t.text)
                else ""
            )
            self.problem(t, f"not a registration form extract knows: {short_text(body[p:end])}{hint}")
            return end
        end = p  # the statement: up to ';', or through a braced body (for (...) { ... })
        depth = 0
        while end < len(body):
            x = body[end].text
            depth += {"(": 1, ")": -1, "{": 1, "}": -1}.get(x, 0)
            end += 1
            if depth == 0 and x in (";", "}"):
                break
        hint = (
            f" (no #define of {t.text} was found in the files read: pass the file that defines it, or "
            f"-D {t.text}= if it registers nothing)"
            if t.kind == "id" and _MACRO_NAME.match(t.text)
            else ""
        )
        self.problem(t, f"not a registration form extract knows: {short_text(body[p:end])}{hint}")
        return end

    def method(self, call: str, args: list[list[Token]], stmt: list[Token], at: Token) -> None:
        if call == "fallback":
            if self.namespace == "_" and "makeFallthrough" in [x.text for x in stmt]:
                self.found.fallbacks.append(Fallback(self.key, at.where, _conds(stmt)))
            else:
                self.problem(
                    at,
                    f"only a fallthrough fallback in TORCH_LIBRARY_IMPL(_, ...) is known: {short_text(stmt)}",
                )
            return
        try:
            wrappers = self.forms.wrappers if self.forms else None
            self.record(impl_call(args, self.namespace, at, wrappers), stmt, at)
        except FormError as e:
            self.problem(e.at, f"{e.message}: {short_text(stmt)}")

    def record(self, form: Form, stmt: list[Token], at: Token) -> None:
        if self.namespace == "_":
            self.problem(
                at, f"an op registration in TORCH_LIBRARY_IMPL(_, {self.key}, ...): {short_text(stmt)}"
            )
            return
        block_device = device_of_key(self.key)
        if form.device is not None and form.device != block_device:
            self.problem(
                at,
                f"a kernel that casts for {form.device} registered on {self.key} ({block_device}): "
                f"{short_text(stmt)}",
            )
            return
        where, conds = form.where or at.where, _conds(stmt)
        if form.fallthrough:
            self.add(Registration(self.key, form.op, None, where, conds, fallthrough=True))
        elif form.unreadable is not None:
            self.add(
                Registration(
                    self.key, form.op, None, where, conds, reason=f"{form.unreadable}; no policy to read"
                )
            )
        elif form.kernel is None:
            self.add(Registration(self.key, form.op, form.policy, where, conds, by_dtype=form.by_dtype))
        else:
            self.add(self.kernel(form, where, conds))

    def kernel(self, form: Form, where: str, conds: tuple[Cond, ...]) -> Registration:
        assert form.kernel is not None
        defn = self.functions.find(form.kernel, self.unit)
        if defn is None:
            why = f"registered with the function {form.kernel}, whose definition is not in the files read"
            return Registration(self.key, form.op, None, where, conds, reason=why)
        fn_where, body = defn
        message, why_not = raised_message(body)
        if message is not None:
            return Registration(self.key, form.op, Policy.BANNED, where, conds, message=message)
        why = f"registered with its own kernel {form.kernel} ({fn_where}): {why_not}; no policy to read"
        return Registration(self.key, form.op, None, where, conds, reason=why)

    def add(self, r: Registration) -> None:
        self.found.registrations.append(r)

"""The macro table and macro expansion, as the C preprocessor does it.

Object-like and function-like macros, ``__VA_ARGS__`` (and GNU named variadics),
``#`` (stringify), ``##`` (paste, with the GNU ``, ## __VA_ARGS__`` comma), arguments
expanded before substitution, and rescanning with hide sets so that a macro never
expands inside its own expansion. Tokens from a macro's body take the place of the
call (file and line); tokens from an argument keep their own, so an op named in a
list in a header is reported at its line in the header.

A caller can keep some macros unexpanded (``keep``): the registration macros whose
meaning :mod:`.registrations` knows are read as they stand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .lexer import Token, spell, tokenize

VA_ARGS = "__VA_ARGS__"


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: object-like
    variadic: bool
    body: tuple[Token, ...]
    file: str
    line: int
    conds: tuple[object, ...] = ()  # undecidable #if conditions around the #define

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


class MacroError(ValueError):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where, self.message = where, message


def parse_define(tokens: tuple[Token, ...], conds: tuple[object, ...] = ()) -> Macro:
    """``tokens``: what follows ``#define`` on its line."""
    if not tokens or tokens[0].kind != "id":
        where = tokens[0].where if tokens else "?"
        raise MacroError(where, "#define without a macro name")
    name = tokens[0]
    rest = tokens[1:]
    if not rest or rest[0].text != "(" or rest[0].ws:
        return Macro(name.text, None, False, rest, name.file, name.line, conds)
    params: list[str] = []
    variadic = False
    i = 1
    while True:
        if i >= len(rest):
            raise MacroError(name.where, f"#define {name.text}: unterminated parameter list")
        t = rest[i]
        if t.text == ")":
            i += 1
            break
        if t.text == "...":
            params.append(VA_ARGS)
            variadic = True
        elif t.kind == "id":
            if i + 1 < len(rest) and rest[i + 1].text == "...":  # GNU: name...
                variadic = True
                i += 1
            params.append(t.text)
        elif t.text != ",":
            raise MacroError(t.where, f"#define {name.text}: unexpected {t.text!r} in the parameters")
        i += 1
    return Macro(name.text, tuple(params), variadic, rest[i:], name.file, name.line, conds)


@dataclass
class MacroTable:
    """Name -> definitions. More than one only where #if blocks left the choice open."""

    defs: dict[str, list[Macro]] = field(default_factory=dict)

    def define(self, m: Macro) -> None:
        alts = self.defs.get(m.name, [])
        self.defs[m.name] = [*alts, m] if m.conds and alts else [m]

    def undef(self, name: str, conds: tuple[object, ...]) -> None:
        if conds and name in self.defs:
            return  # defined on one path, not on the other: the definitions stay, as on the path kept
        self.defs.pop(name, None)

    def get(self, name: str) -> list[Macro]:
        return self.defs.get(name, [])

    def is_defined(self, name: str) -> bool:
        return name in self.defs


Keep = Callable[[str, Macro], bool]


class Expander:
    """Expands token lists with a :class:`MacroTable`; problems are collected, not raised."""

    def __init__(self, table: MacroTable, keep: Keep | None = None) -> None:
        self.table = table
        self.keep = keep or (lambda name, m: False)
        self.problems: list[MacroError] = []

    def expand(self, tokens: list[Token]) -> list[Token]:
        toks = list(tokens)
        out: list[Token] = []
        i = 0
        while i < len(toks):
            t = toks[i]
            alts = self.table.get(t.text) if t.kind == "id" and t.text not in t.hide else []
            if not alts or self.keep(t.text, alts[0]):
                out.append(t)
                i += 1
                continue
            if len(alts) > 1:
                places = ", ".join(m.where for m in alts)
                self.problems.append(
                    MacroError(
                        t.where,
                        f"{t.text} has {len(alts)} definitions under #if conditions that cannot be "
                        f"decided ({places}); decide them with -D",
                    )
                )
                out.append(t)
                i += 1
                continue
            m = alts[0]
            if m.params is None:
                toks[i : i + 1] = self._substitute(m, [], t)
                continue
            if i + 1 >= len(toks) or toks[i + 1].text != "(":
                out.append(t)  # a function-like macro's name without a call stays a name
                i += 1
                continue
            collected = collect_args(toks, i + 1)
            if collected is None:
                self.problems.append(MacroError(t.where, f"{t.text}(: unterminated macro call"))
                out.extend(toks[i:])
                break
            fitted = self._fit_args(m, collected[0], t)
            if fitted is None:
                out.append(t)
                i += 1
                continue
            toks[i : collected[1]] = self._substitute(m, fitted, t)
        return out

    def _fit_args(self, m: Macro, args: list[list[Token]], site: Token) -> list[list[Token]] | None:
        assert m.params is not None
        want = len(m.params)
        if want == 0 and args == [[]]:
            return []
        if m.variadic:
            if len(args) < want - 1:
                self.problems.append(
                    MacroError(site.where, f"{m.name} takes at least {want - 1} arguments, got {len(args)}")
                )
                return None
            fixed, extra = args[: want - 1], args[want - 1 :]
            joined: list[Token] = []
            for k, a in enumerate(extra):
                if k:
                    joined.append(Token("punct", ",", site.file, site.line))
                joined.extend(a)
            return [*fixed, joined]
        if len(args) != want:
            self.problems.append(
                MacroError(site.where, f"{m.name} takes {want} argument(s), got {len(args)} ({m.where})")
            )
            return None
        return args

    def _substitute(self, m: Macro, args: list[list[Token]], site: Token) -> list[Token]:
        hide = site.hide | {m.name}
        conds = _union(site.conds, m.conds)
        params = {p: k for k, p in enumerate(m.params or ())}
        body = m.body
        out: list[Token] = []
        expanded: dict[int, list[Token]] = {}
        j = 0
        while j < len(body):
            b = body[j]
            nxt = body[j + 1] if j + 1 < len(body) else None
            prev_paste = bool(out) and j > 0 and body[j - 1].text == "##"
            if b.text == "#" and m.params is not None and nxt is not None and nxt.text in params:
                text = '"' + spell(args[params[nxt.text]]).replace("\\", "\\\\").replace('"', '\\"') + '"'
                out.append(Token("str", text, site.file, site.line, b.ws, hide, conds))
                j += 2
                continue
            if b.text == "##" and out:
                j += 1
                continue  # the paste happens when the right operand is placed
            if b.kind == "id" and b.text in params:
                arg = args[params[b.text]]
                raw = (nxt is not None and nxt.text == "##") or prev_paste
                if not raw and params[b.text] not in expanded:
                    expanded[params[b.text]] = self.expand(list(arg))
                source = arg if raw else expanded[params[b.text]]
                piece = [a.but(hide=a.hide | hide, conds=_union(a.conds, conds)) for a in source]
                if piece:
                    piece[0] = piece[0].but(ws=b.ws)
                if prev_paste:
                    if b.text == VA_ARGS and not arg and out and out[-1].text == ",":
                        out.pop()  # GNU: , ## __VA_ARGS__ drops the comma when there are none
                    elif piece and out:
                        out[-1:] = self._paste(out[-1], piece[0], site, m) + piece[1:]
                        piece = []
                out.extend(piece)
                j += 1
                continue
            tok = Token(b.kind, b.text, site.file, site.line, b.ws, hide, conds, b.spelled_at)
            if prev_paste:
                out[-1:] = self._paste(out[-1], tok, site, m)
            else:
                out.append(tok)
            j += 1
        if out:
            out[0] = out[0].but(ws=site.ws)
        return out

    def _paste(self, left: Token, right: Token, site: Token, m: Macro) -> list[Token]:
        text = left.text + right.text
        lines = tokenize(text, site.file)
        toks = lines[0].tokens if len(lines) == 1 else ()
        if len(toks) != 1:
            self.problems.append(MacroError(site.where, f"{m.name}: '##' makes {text!r}, not one token"))
            return [left, right]
        t = toks[0]
        return [Token(t.kind, t.text, left.file, left.line, left.ws, left.hide | right.hide, left.conds)]


def collect_args(toks: list[Token], open_at: int) -> tuple[list[list[Token]], int] | None:
    """The arguments of the call whose '(' is at ``open_at``, and the index after its ')'."""
    depth = 0
    args: list[list[Token]] = [[]]
    for k in range(open_at, len(toks)):
        t = toks[k]
        if t.text == "(":
            depth += 1
            if depth == 1:
                continue
        elif t.text == ")":
            depth -= 1
            if depth == 0:
                return args, k + 1
        elif t.text == "," and depth == 1:
            args.append([])
            continue
        args[-1].append(t)
    return None


def _union(a: tuple[object, ...], b: tuple[object, ...]) -> tuple[object, ...]:
    return a if not b or a == b else tuple(dict.fromkeys((*a, *b)))

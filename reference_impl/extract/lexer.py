"""C++ source to preprocessing tokens, each with its file and line.

Comments become whitespace, a backslash at the end of a line joins it to the next
(as in translation phase 2, before comments are removed: a ``//`` comment that ends in
``\\`` takes the next line with it, which :func:`spliced_comments` reports), and the text
is split into logical lines, because preprocessor directives are line-based. String
literals keep their spelling; :func:`string_value` decodes one. A quote that opens no
literal closed on its line becomes one ``bad`` token to the end of the line, which the
preprocessor reports where it is compiled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PUNCT = sorted(
    [
        "...", "<<=", ">>=", "->*", "::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=",
        "&&", "||", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "##", ".*",
    ],
    key=len,
    reverse=True,
)  # fmt: skip

# backslash-newline, with the whitespace GCC, Clang and C++23 allow between them
_SPLICE = r"\\[ \t\f\v]*\r?\n"
LINE_COMMENT = r"//(?:" + _SPLICE + r"|[^\n])*"

_TOKEN = re.compile(
    r"""
    (?P<nl>\n)
  | (?P<ws>[ \t\r\f\v]+|"""
    + _SPLICE
    + r""")
  | (?P<lc>"""
    + LINE_COMMENT
    + r""")
  | (?P<bc>/\*.*?\*/)
  | (?P<raw>(?:u8|u|U|L)?R"(?P<delim>[^()\\ \n]{0,16})\(.*?\)(?P=delim)")
  | (?P<str>(?:u8|u|U|L)?"(?:\\.|[^"\\\n])*")
  | (?P<chr>(?:u8|u|U|L)?'(?:\\.|[^'\\\n])*')
  | (?P<bad>(?:u8|u|U|L)?R?["'][^\n]*)
  | (?P<num>\.?[0-9](?:[eEpP][+-]|[0-9A-Za-z_.']|)*)
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<punct>"""
    + "|".join(re.escape(p) for p in _PUNCT)
    + r"""|.)
    """,
    re.VERBOSE | re.DOTALL,
)


class Token:
    """One preprocessing token.

    ``kind``: ``id``, ``num``, ``str``, ``chr`` or ``punct``. ``ws``: whitespace came
    before it (stringification keeps one space there). ``hide``: the macros that
    produced it and must not expand it again. ``conds``: the undecidable ``#if``
    conditions around the place it came from (see :mod:`.preprocess`). ``file``/``line``:
    where it stands after macro expansion (the call site, for a macro body's tokens);
    ``origin``: where it is spelled, when that is elsewhere (in the macro's definition).
    """

    __slots__ = ("conds", "file", "hide", "kind", "line", "origin", "text", "ws")

    def __init__(
        self,
        kind: str,
        text: str,
        file: str,
        line: int,
        ws: bool = False,
        hide: frozenset[str] = frozenset(),
        conds: tuple[object, ...] = (),
        origin: str | None = None,
    ) -> None:
        self.kind = kind
        self.text = text
        self.file = file
        self.line = line
        self.ws = ws
        self.hide = hide
        self.conds = conds
        self.origin = origin

    def but(self, **changes: object) -> Token:
        """A copy with some fields changed."""
        fields = {s: getattr(self, s) for s in self.__slots__}
        fields.update(changes)
        return Token(**fields)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def spelled_at(self) -> str:
        return self.origin or self.where

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.where})"


@dataclass(frozen=True)
class Line:
    """A logical line: its tokens and the physical line it starts on."""

    tokens: tuple[Token, ...]
    line: int

    @property
    def is_directive(self) -> bool:
        return bool(self.tokens) and self.tokens[0].text == "#" and self.tokens[0].kind == "punct"


@dataclass(frozen=True)
class Spliced:
    """A line that a ``//`` comment ending in a backslash made part of the comment."""

    file: str
    line: int  # the line the text stands on
    comment_line: int  # the line the comment starts on
    text: str

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def tokenize(text: str, file: str, spliced: list[Spliced] | None = None) -> list[Line]:
    """The logical lines of ``text`` (comments removed, continuations joined).

    ``spliced``, when given, receives each line a ``//`` comment swallowed through a
    trailing backslash that would have been code (neither blank nor a comment itself):
    C++ joins the lines before it removes comments, so that text is not compiled.
    """
    lines: list[Line] = []
    current: list[Token] = []
    line = 1
    start = 1
    ws = False
    pos = 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        assert m is not None  # the last alternative matches any character
        kind = m.lastgroup
        chunk = m.group()
        pos = m.end()
        if kind == "nl":
            lines.append(Line(tuple(current), start))
            current = []
            line += 1
            start = line
            ws = False
            continue
        if kind in ("ws", "lc", "bc"):
            if kind == "lc" and spliced is not None and "\n" in chunk:
                for k, part in enumerate(chunk.split("\n")[1:], 1):
                    code = re.sub(_SPLICE + "$", "", part + "\n").strip()
                    if code and not code.startswith("//"):
                        spliced.append(Spliced(file, line + k, line, code))
            line += chunk.count("\n")
            ws = True
            continue
        if kind == "delim":
            kind = "raw"
        tok_kind = {"raw": "str", "str": "str", "chr": "chr", "num": "num", "id": "id", "bad": "bad"}.get(
            kind or "", "punct"
        )
        current.append(Token(tok_kind, chunk, file, line, ws))
        line += chunk.count("\n")  # raw strings may span lines
        ws = False
    if current:
        lines.append(Line(tuple(current), start))
    return lines


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "?": "?"}  # fmt: skip
_ESCAPE = re.compile(r"\\(x[0-9A-Fa-f]+|[0-7]{1,3}|.)", re.DOTALL)


def string_value(tok: Token) -> str:
    """The characters a string literal token stands for."""
    text = tok.text
    raw = re.match(r'(?:u8|u|U|L)?R"([^(]*)\((.*)\)\1"$', text, re.DOTALL)
    if raw:
        return raw.group(2)
    body = text[text.index('"') + 1 : -1]

    def unescape(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] == "x":
            return chr(int(e[1:], 16))
        if e[0] in "01234567" and (len(e) > 1 or e[0] != "0"):
            return chr(int(e, 8))
        return _ESCAPES.get(e, e)

    return _ESCAPE.sub(unescape, body)


def spell(tokens: list[Token] | tuple[Token, ...]) -> str:
    """Tokens as text, one space where the source had whitespace (as ``#`` stringifies)."""
    out: list[str] = []
    for i, t in enumerate(tokens):
        if i and t.ws:
            out.append(" ")
        out.append(t.text)
    return "".join(out)

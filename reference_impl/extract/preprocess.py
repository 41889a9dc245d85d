"""Directives, includes and conditional blocks: one translation unit to expanded tokens.

Each unit (a ``.cpp`` file, or a header read on its own) starts from the ``-D``
definitions. ``#include`` is followed when the file is found beside the includer or
in the source trees; ``ATen/autocast_mode.h`` that is not there is taken from the
installed torch (its ``AT_FORALL_*`` lists): ``aten/src/ATen/autocast_mode.cpp`` finds
``aten/src/ATen/autocast_mode.h`` by its ancestor ``aten/src``. Only the directives of included files
are read (their macros), not their code. The other headers of ATen, c10 and torch (and those
``autocast_mode.h`` includes) are not read: the registration macros are read by their meaning
(:mod:`.forms`), and none of their other macros decides a registration; reading them would
only take time (thousands of files).

Conditional blocks: a condition the sources decide keeps one branch; one they do
not decide (a build flag) keeps every branch, and the tokens there carry a
:class:`~.conditions.Cond` (with ``negated`` for the other branches). Two rules decide
more, without guessing: a branch that holds nothing but ``#error`` is never taken in a
build that compiles (so ``#if C ... #else #error ... #endif`` keeps the first branch),
and ``#ifndef X`` followed by ``#define X`` is an include guard.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .conditions import Cond, evaluate
from .lexer import LINE_COMMENT, Line, Spliced, Token, spell, tokenize
from .macros import Expander, Keep, Macro, MacroError, MacroTable, parse_define

SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx", ".h", ".hpp", ".hh")
AUTOCAST_HEADER = "ATen/autocast_mode.h"
_FRAMEWORK = ("ATen/", "c10/", "torch/", "caffe2/")
_MAX_DEPTH = 40
_COMMENT_OR_LITERAL = re.compile(
    LINE_COMMENT + r'|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL
)


@dataclass(frozen=True)
class Problem:
    where: str  # file:line
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Unit:
    """A preprocessed translation unit: its tokens (macros expanded) and what it used."""

    path: Path
    tokens: list[Token]
    headers: list[Path] = field(default_factory=list)  # autocast_mode.h files it read
    problems: list[Problem] = field(default_factory=list)
    spliced: list[Spliced] = field(default_factory=list)  # code lines '//' comments swallowed
    unreadable: bool = False  # a lexical error: its tokens cannot be read as statements


def is_aten_autocast_header(file: str) -> bool:
    p = Path(file)
    return p.name == "autocast_mode.h" and p.parent.name == "ATen"


class _Frame:
    """One #if group being read."""

    def __init__(self, active: bool, decided: bool, conds: tuple[Cond, ...]) -> None:
        self.active = active  # the current branch is read
        self.decided = decided  # some branch was definitely taken: the rest are not
        self.conds = conds  # the undecidable conditions of the current branch
        self.negs: tuple[Cond, ...] = ()  # negations of earlier undecidable branches
        self.dead = False  # the whole group sits in an unread branch


class Preprocessor:
    def __init__(
        self,
        roots: list[Path],
        torch_header: Path | None,
        defines: list[Macro],
        keep: Keep,
    ) -> None:
        self.roots = roots
        self.torch_header = torch_header
        self.defines = defines
        self.keep = keep
        self._lines: dict[tuple[Path, bool], list[Line]] = {}
        self._spliced: dict[tuple[Path, bool], list[Spliced]] = {}
        self._index: dict[str, list[Path]] | None = None

    # --- files ---------------------------------------------------------------------------

    def _read_lines(self, path: Path, directives_only: bool) -> tuple[list[Line], list[Spliced]]:
        """The file's logical lines, and the lines its ``//`` comments swallow through a trailing
        backslash (of a header read for its directives: the directives swallowed)."""
        key = (path, directives_only)
        if key not in self._lines:
            text = path.read_text(encoding="utf-8", errors="replace")
            spliced: list[Spliced] = []
            if directives_only:
                tokenize(text, str(path), spliced)
                spliced = [sp for sp in spliced if sp.text.startswith("#")]
                self._lines[key] = tokenize(_only_directives(text), str(path))
            else:
                self._lines[key] = tokenize(text, str(path), spliced)
            self._spliced[key] = spliced
        return self._lines[key], self._spliced[key]

    def _file_index(self) -> dict[str, list[Path]]:
        if self._index is None:
            self._index = {}
            for root in self.roots:
                files = [root] if root.is_file() else sorted(root.rglob("*"))
                for f in files:
                    if f.suffix in SOURCE_SUFFIXES and f.is_file():
                        self._index.setdefault(f.name, []).append(f)
        return self._index

    def resolve_include(self, name: str, quoted: bool, includer: Path) -> Path | None:
        """Beside the includer (quoted), under one of its ancestors (the tree it sits in), by its
        path anywhere in the source trees; ``autocast_mode.h`` last from the installed torch."""
        if quoted and (includer.parent / name).is_file():
            return includer.parent / name
        for ancestor in includer.resolve().parents:
            if (ancestor / name).is_file():
                return ancestor / name
        suffix = "/" + name.lstrip("./")
        found = [
            p for p in self._file_index().get(Path(name).name, []) if ("/" + p.as_posix()).endswith(suffix)
        ]
        if found:
            return min(found, key=lambda p: (not p.is_relative_to(includer.parent), len(p.parts), str(p)))
        if Path(name).name == "autocast_mode.h" and self.torch_header is not None:
            return self.torch_header
        return None

    # --- units ---------------------------------------------------------------------------

    def unit(self, path: Path) -> Unit:
        table = MacroTable()
        for m in self.defines:
            table.define(m)
        run = _Run(self, table, Unit(path, []))
        run.file(path, (), 0, directives_only=False)
        run.flush()
        run.unit.problems += [Problem(e.where, e.message) for e in run.expander.problems]
        return run.unit


class _Run:
    """The state of one unit being preprocessed."""

    def __init__(self, pp: Preprocessor, table: MacroTable, unit: Unit) -> None:
        self.pp = pp
        self.table = table
        self.unit = unit
        self.expander = Expander(table, pp.keep)
        self.pending: list[Token] = []
        self.included: set[Path] = set()

    def flush(self) -> None:
        if self.pending:
            out = self.expander.expand(self.pending)
            for t in out:
                if t.kind == "bad":
                    what = "string" if '"' in t.text[:4] else "character"
                    self.problem(
                        t,
                        f"unterminated {what} literal: {t.text[:60]} (no closing {t.text.lstrip('uUL8R')[0]} "
                        "on its line)",
                    )
                    self.unit.unreadable = True
            self.unit.tokens.extend(out)
            self.pending = []

    def problem(self, tok: Token, message: str) -> None:
        self.unit.problems.append(Problem(tok.where, message))

    def file(self, path: Path, base: tuple[Cond, ...], depth: int, directives_only: bool) -> None:
        self.included.add(path.resolve())
        lines, spliced = self.pp._read_lines(path, directives_only)
        shape = _Shape(lines)
        stack: list[_Frame] = []

        def conds() -> tuple[Cond, ...]:
            out = base
            for f in stack:
                out = (*out, *f.negs, *f.conds)
            return out

        for idx, line in enumerate(lines):
            active = all(f.active for f in stack)
            if spliced and active:  # a swallowed line matters only where its line is compiled
                end = lines[idx + 1].line if idx + 1 < len(lines) else line.line + 1
                self.unit.spliced += [
                    sp for sp in spliced if line.line <= sp.comment_line < end and sp not in self.unit.spliced
                ]
            if not line.is_directive:
                if active and not directives_only and line.tokens:
                    c = conds()
                    self.pending.extend(t.but(conds=c) if c else t for t in line.tokens)
                continue
            toks = line.tokens[1:]
            name = toks[0].text if toks else ""
            rest = list(toks[1:])
            if name in ("if", "ifdef", "ifndef"):
                if not active:
                    frame = _Frame(False, True, ())
                    frame.dead = True
                    stack.append(frame)
                    continue
                value = self._judge(name, rest, lines, idx, shape)
                text = (
                    spell(rest)
                    if name == "if"
                    else f"{'!' if name == 'ifndef' else ''}defined({spell(rest)})"
                )
                stack.append(_Frame(value is not False, value is True, self._cond(value, text, toks[0])))
            elif name in ("elif", "else"):
                if not stack:
                    self.problem(toks[0], f"#{name} without #if")
                    continue
                f = stack[-1]
                if f.dead:
                    continue
                if f.conds:
                    f.negs = (*f.negs, *(Cond(c.text, c.file, c.line, not c.negated) for c in f.conds[-1:]))
                if f.decided:
                    f.active, f.conds = False, ()
                    continue
                value = self._judge("if", rest, lines, idx, shape) if name == "elif" else True
                f.active, f.decided = value is not False, value is True
                f.conds = self._cond(value, spell(rest), toks[0]) if name == "elif" else ()
            elif name == "endif":
                if not stack:
                    self.problem(toks[0], "#endif without #if")
                    continue
                stack.pop()
            elif not active:
                continue
            elif name == "define":
                self.flush()
                try:
                    self.table.define(parse_define(tuple(rest), conds()))
                except MacroError as e:
                    self.unit.problems.append(Problem(e.where, e.message))
            elif name == "undef":
                self.flush()
                if rest:
                    self.table.undef(rest[0].text, conds())
            elif name == "include":
                self.flush()
                self._include(rest, path, conds(), depth)
            elif name == "error" and not conds():
                self.problem(
                    toks[0], f"#error reached: {spell(rest)} (decide the conditions around it with -D)"
                )
        if stack:
            self.unit.problems.append(Problem(f"{path}:{len(lines)}", "#if without #endif"))

    def _cond(self, value: bool | None, text: str, at: Token) -> tuple[Cond, ...]:
        return (Cond(text, at.file, at.line),) if value is None else ()

    def _judge(self, kind: str, rest: list[Token], lines: list[Line], idx: int, shape: _Shape) -> bool | None:
        if kind == "if":
            value = evaluate(rest, self.table)
        else:
            name = rest[0].text if rest else ""
            value = True if self.table.is_defined(name) else None
            if kind == "ifndef":
                if value is None and shape.guards(idx, name):
                    return True
                value = None if value is None else not value
        if value is None:
            if shape.error_only(idx):
                return False
            if shape.rest_error_only(idx):
                return True
        return value

    def _include(self, rest: list[Token], includer: Path, conds: tuple[Cond, ...], depth: int) -> None:
        if not rest:
            return
        if rest[0].kind == "str":
            name, quoted = rest[0].text.strip('"'), True
        elif rest[0].text == "<":
            name, quoted = "".join(t.text for t in rest[1:] if t.text != ">"), False
        else:
            return  # a computed include: nothing to read
        framework = name.startswith(_FRAMEWORK) and name != AUTOCAST_HEADER
        if framework or is_aten_autocast_header(str(includer)):
            return  # ATen, c10 and torch define nothing registration needs (see the module docstring)
        found = self.pp.resolve_include(name, quoted, includer)
        if found is None or found.resolve() in self.included or depth >= _MAX_DEPTH:
            return
        if Path(name).name == "autocast_mode.h":
            self.unit.headers.append(found)
        self.file(found, conds, depth + 1, directives_only=True)


class _Shape:
    """The #if groups of a file: where each branch starts and what it holds."""

    def __init__(self, lines: list[Line]) -> None:
        self.lines = lines
        self.next_branch: dict[int, int] = {}  # branch directive -> the next one of its group
        self.is_else: dict[int, bool] = {}
        opened: list[list[int]] = []
        for i, line in enumerate(lines):
            if not line.is_directive or len(line.tokens) < 2:
                continue
            d = line.tokens[1].text
            if d in ("if", "ifdef", "ifndef"):
                opened.append([i])
            elif d in ("elif", "else", "endif") and opened:
                self.next_branch[opened[-1][-1]] = i
                self.is_else[i] = d == "else"
                if d == "endif":
                    opened.pop()
                else:
                    opened[-1].append(i)

    def _body(self, idx: int) -> list[Line]:
        end = self.next_branch.get(idx, idx + 1)
        return [ln for ln in self.lines[idx + 1 : end] if ln.tokens]

    def error_only(self, idx: int) -> bool:
        body = self._body(idx)
        return bool(body) and all(
            ln.is_directive and ln.tokens[1:2] and ln.tokens[1].text == "error" for ln in body
        )

    def rest_error_only(self, idx: int) -> bool:
        """Every later branch of the group holds only #error, and the last is an #else."""
        k = self.next_branch.get(idx)
        saw_else = False
        while k is not None and k in self.next_branch:
            if not self.error_only(k):
                return False
            saw_else = saw_else or self.is_else.get(k, False)
            k = self.next_branch.get(k)
        return saw_else

    def guards(self, idx: int, name: str) -> bool:
        """``#ifndef NAME`` at idx is followed by ``#define NAME``: an include guard."""
        for ln in self.lines[idx + 1 :]:
            if not ln.tokens:
                continue
            t = ln.tokens
            return ln.is_directive and len(t) >= 3 and t[1].text == "define" and t[2].text == name
        return False


def _only_directives(text: str) -> str:
    """The text with everything but directive lines blanked (line numbers kept)."""

    def blank(m: re.Match[str]) -> str:
        s = m.group()
        return s if s[0] in "\"'" else " " + "\n" * s.count("\n")

    text = _COMMENT_OR_LITERAL.sub(blank, text)
    out: list[str] = []
    keep = False
    for raw in text.split("\n"):
        if not keep:
            keep = raw.lstrip().startswith("#")
        out.append(raw if keep else "")
        keep = keep and raw.rstrip(" \t\f\v\r").endswith("\\")
    return "\n".join(out)

"""Read SOURCE files and trees: every Autocast registration in them, and the problems.

Torch-free: the installed torch is only located (:func:`installed_autocast_header`),
never imported, for the ``ATen/autocast_mode.h`` a source includes but does not hold.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autocast_spec.model import SourceForms

from .forms import TORCH_API, is_registration_macro
from .lexer import Spliced, tokenize
from .macros import Macro, MacroError, parse_define
from .preprocess import SOURCE_SUFFIXES, Preprocessor, Problem, Unit, is_aten_autocast_header
from .registrations import Found, Functions
from .units import WRAPPED, read_unit

_MARKER = "Autocast"  # a file without it registers nothing for an Autocast key


class ExtractError(Exception):
    """User errors and unreadable sources: one line each (file:line: what), exit code 2."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def installed_autocast_header() -> Path | None:
    """``torch/include/ATen/autocast_mode.h`` of the installed torch, located without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        header = Path(loc) / "include" / "ATen" / "autocast_mode.h"
        if header.is_file():
            return header
    return None


def parse_defines(items: Sequence[str]) -> list[Macro]:
    """``-D NAME``, ``-D NAME=VALUE``, ``-D 'NAME(ARGS)=BODY'`` as the compiler takes them."""
    out = []
    for item in items:
        name, _, value = item.partition("=")
        text = f"{name} {value if value or '=' in item else '1'}"
        lines = tokenize(text, f"-D {item}")
        try:
            if len(lines) != 1:
                raise MacroError(f"-D {item}", "not a macro definition")
            out.append(parse_define(lines[0].tokens))
        except MacroError as e:
            raise ExtractError(
                [f"-D {item}: {e.message}; write -D NAME, -D NAME=VALUE or -D 'NAME()=VALUE'"]
            ) from None
    return out


def _keep(name: str, macro: Macro) -> bool:
    """Macros read by their meaning rather than expanded (see :mod:`.forms`); and a vendor's own
    ``*TORCH_LIBRARY_IMPL`` macro that is not a plain alias of ``TORCH_LIBRARY_IMPL``: expanded, its
    block would vanish into the vendor's code, so it stays as written and is reported (unless the
    vendor file's ``source_forms`` say what it stands for)."""
    if name in TORCH_API or (is_registration_macro(name) and is_aten_autocast_header(macro.file)):
        return True
    like = next((w for w in WRAPPED if name.endswith(w)), None)
    return like is not None and name != like and [t.text for t in macro.body[:1]] != [like]


def source_files(sources: list[Path]) -> list[Path]:
    """The files to read as units: files named, and the C++ files of trees that mention Autocast."""
    out: list[Path] = []
    for src in sources:
        if src.is_file():
            out.append(src)
            continue
        if not src.is_dir():
            raise ExtractError([f"{src}: no such file or directory"])
        for f in sorted(src.rglob("*")):
            if f.suffix in SOURCE_SUFFIXES and f.is_file():
                try:
                    if _MARKER in f.read_text(encoding="utf-8", errors="replace"):
                        out.append(f)
                except OSError:
                    continue
    return out


@dataclass
class Scan:
    """Everything read from the sources."""

    sources: list[Path]
    units: list[Unit]
    found: Found
    headers: list[Path] = field(default_factory=list)  # the autocast_mode.h files read
    torch_header: Path | None = None
    spliced: list[Spliced] = field(default_factory=list)  # code lines '//' comments swallowed

    @property
    def used_torch_header(self) -> bool:
        return self.torch_header is not None and self.torch_header in self.headers


def scan(
    sources: list[Path],
    defines: Sequence[str] = (),
    torch_header: Path | None = None,
    forms: SourceForms | None = None,
) -> Scan:
    """Preprocess every unit of ``sources`` and read its Autocast blocks (``forms``: a vendor's own
    registration forms, from its spec file)."""
    files = source_files(sources)
    roots = [s for s in sources if s.is_dir()]
    opening = frozenset(forms.block_macros if forms else ())  # read by their meaning, never expanded
    pp = Preprocessor(
        roots, torch_header, parse_defines(defines), lambda name, m: name in opening or _keep(name, m)
    )
    units: list[Unit] = []
    for f in files:
        try:
            units.append(pp.unit(f))
        except (OSError, UnicodeError) as e:
            raise ExtractError([f"{f}: cannot read: {e}"]) from None
    found = Found()
    functions = Functions(units)
    headers: list[Path] = []
    spliced: list[Spliced] = []
    for u in units:
        found.problems.extend(u.problems)
        headers += [h for h in u.headers if h not in headers]
        spliced += [sp for sp in u.spliced if sp not in spliced]
        if not u.unreadable:  # a lexical error: its problem stands, and nothing after it is guessed at
            read_unit(u, functions, found, forms)
    return Scan(sources, units, found, headers, torch_header, spliced)


def problems_of(s: Scan) -> list[Problem]:
    """One problem per place: the first found there (a later one is its consequence, e.g. a macro
    call whose expansion failed and that then reads as an unknown form). The same message at
    several places of one file (a macro of the sources' own that no file read defines, used on
    every line) is one problem, at its first place, with the count of the others."""
    seen: dict[str, Problem] = {}
    for p in s.found.problems:
        seen.setdefault(p.where, p)
    alike: dict[tuple[str, str], list[Problem]] = {}
    for p in seen.values():
        alike.setdefault((p.where.rpartition(":")[0], p.message), []).append(p)
    out = []
    for same in alike.values():
        first = same[0]
        if len(same) > 1:
            lines = ", ".join(p.where.rpartition(":")[2] for p in same[1:4]) + (
                ", ..." if len(same) > 4 else ""
            )
            first = Problem(first.where, f"{first.message} (the same at {len(same) - 1} more lines: {lines})")
        out.append(first)
    return out

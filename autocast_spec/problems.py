"""Errors found in spec files, each tied to a file and line."""

from __future__ import annotations

from collections.abc import Iterable


class SpecProblem(Exception):
    """One problem in one spec file. ``line`` 0 means the file as a whole."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"

    def sort_key(self) -> tuple[str, int, str]:
        return (self.file, self.line, self.message)


class SpecError(Exception):
    """Raised by the loader with every problem it found, sorted by place."""

    def __init__(self, problems: Iterable[SpecProblem]) -> None:
        self.problems = sorted(problems, key=SpecProblem.sort_key)
        super().__init__("\n".join(str(p) for p in self.problems))

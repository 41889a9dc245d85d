"""Read one YAML file into plain data plus a map from data path to source line.

The only place in the project that parses YAML.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .problems import SpecProblem

PathKey = tuple[str | int, ...]


@dataclass(frozen=True)
class YamlDocument:
    file: str
    data: Any
    lines: dict[PathKey, int]  # 1-based line of each mapping value / sequence item

    def line_of(self, path: PathKey) -> int:
        """The line of ``path``, or of its nearest ancestor that has one."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.lines.get((), 1)


class _UniqueKeyError(Exception):
    def __init__(self, key: str, line: int) -> None:
        super().__init__(key)
        self.key = key
        self.line = line


def _convert(node: yaml.Node, path: PathKey, lines: dict[PathKey, int]) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = (
                yaml.safe_load(yaml.serialize(key_node))
                if not isinstance(key_node, yaml.ScalarNode)
                else _scalar(key_node)
            )
            if key in out:
                raise _UniqueKeyError(str(key), key_node.start_mark.line + 1)
            child = (*path, key)
            out[key] = _convert(value_node, child, lines)
            lines[child] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), lines) for i, item in enumerate(node.value)]
    return _scalar(node)


# PyYAML's safe constructor gives a scalar its value by tag (int, float, bool, null, str).
_CONSTRUCTOR = yaml.SafeLoader("")
# libyaml's parser where PyYAML was built with it (about 3x faster), else the Python one.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _scalar(node: yaml.Node) -> Any:
    value = _CONSTRUCTOR.construct_object(node, deep=True)
    _CONSTRUCTOR.constructed_objects.pop(node, None)  # the shared constructor keeps no nodes
    return value


def read_yaml(path: Path, display: str | None = None) -> YamlDocument:
    """Parse ``path``. Raises :class:`SpecProblem` on unreadable files or syntax errors."""
    name = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecProblem(name, 0, "file not found") from None
    except OSError as e:
        raise SpecProblem(name, 0, f"cannot read file: {e.strerror}") from None
    except UnicodeDecodeError:
        raise SpecProblem(name, 0, "file is not UTF-8 text") from None
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 0
        what = e.problem or str(e)
        ctx = e.context_mark
        if ctx is not None and ctx.line + 1 != line and e.context:
            what += f" ({e.context} at line {ctx.line + 1})"
        raise SpecProblem(name, line, f"YAML syntax error: {what}") from None
    except yaml.YAMLError as e:
        raise SpecProblem(name, 0, f"YAML syntax error: {e}") from None
    if node is None:
        raise SpecProblem(name, 1, "the file is empty; a spec file needs at least a 'kind:'")
    lines: dict[PathKey, int] = {}
    try:
        data = _convert(node, (), lines)
    except _UniqueKeyError as e:
        raise SpecProblem(name, e.line, f"duplicate key {e.key!r}") from None
    except yaml.YAMLError as e:
        raise SpecProblem(name, 0, f"YAML error: {e}") from None
    return YamlDocument(name, data, lines)

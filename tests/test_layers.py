"""The packages' layering, read from the source (no import is executed).

Three layers, imports pointing down only::

    conformance     the pytest plugin, the suite, certification, the autocast-spec command
    reference_impl  policy engine, oracle, reference autocast, probe, diff, matrix
    autocast_spec   the spec: YAML source, model, loader, schema (torch-free)

An import is function-level only where the allowlist below says why. No module takes another
module's private name: in the three packages, nor in tests/ (from the packages or from the
test helpers).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("autocast_spec", "reference_impl", "conformance")  # bottom to top
# Third-party packages the torch-free spec layer may import.
SPEC_LAYER_THIRD_PARTY = frozenset({"yaml", "jsonschema", "packaging"})
MAX_MODULE_LINES = 400

# (module, imported module) -> why the import must stay inside a function. Keep this short.
FUNCTION_LEVEL_ALLOWED: dict[tuple[str, str], str] = {
    ("reference_impl.kernels.fast_kernels", "torch.utils"): (
        "torch.utils.cpp_extension pulls in setuptools (0.1 s per process); only the first "
        "reference region of a process, which builds or loads the C++ kernels, needs it"
    ),
    **{
        (module, target): (
            "torch._inductor costs about 1.4 s to import: only a compiled mode's run "
            "(inductor, AOTInductor) needs it, not every process that loads the suite"
        )
        for module, target in (
            ("reference_impl.modes.aoti", "torch._inductor"),
            ("reference_impl.modes.batch", "torch._inductor.config"),
            ("reference_impl.modes.aoti_packages", "torch._inductor"),
            ("reference_impl.programs.pass_code", "torch._inductor"),
            ("reference_impl.programs.pass_code", "torch._inductor.config"),
        )
    },
}


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, absolute and dotted
    line: int
    top_level: bool  # False when inside a function or method body
    path: Path
    names: tuple[str, ...] = ()  # the names taken with ``from target import ...``

    def where(self) -> str:
        return f"{self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path}:{self.line}"


def modules() -> Iterator[tuple[str, Path]]:
    for top in LAYERS:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            yield ".".join(parts), path


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str, path: Path) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend(Import(module, a.name, child.lineno, not in_function, path) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = _absolute(module, is_package, child)
                names = tuple(a.name for a in child.names)
                found.append(Import(module, target, child.lineno, not in_function, path, names))
            visit(child, nested)

    visit(tree, False)
    return found


def all_imports() -> list[Import]:
    return [imp for module, path in modules() for imp in imports_of(module, path)]


TESTS = REPO / "tests"


def modules_under_tests() -> Iterator[tuple[str, Path]]:
    """The modules under tests/, named as they import each other (tests/ is on sys.path:
    ``helpers.suite_runs``, ``mutation.catalogue``, ``test_layers``)."""
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        yield ".".join(parts), path


def imports_under_tests() -> list[Import]:
    return [imp for module, path in modules_under_tests() for imp in imports_of(module, path)]


def layer_of(name: str) -> int | None:
    top = name.split(".")[0]
    return LAYERS.index(top) if top in LAYERS else None


def upward(imports: list[Import]) -> list[str]:
    bad = []
    for imp in imports:
        here, there = layer_of(imp.module), layer_of(imp.target)
        if here is not None and there is not None and there > here:
            bad.append(f"{imp.where()}: {imp.module} ({LAYERS[here]}) imports {imp.target} ({LAYERS[there]})")
    return bad


def spec_layer_foreign(imports: list[Import]) -> list[str]:
    """Imports of the spec layer outside the standard library and its three dependencies."""
    bad = []
    for imp in imports:
        if layer_of(imp.module) != 0:
            continue
        top = imp.target.split(".")[0]
        if top in ("", "autocast_spec") or top in sys.stdlib_module_names or top in SPEC_LAYER_THIRD_PARTY:
            continue
        bad.append(f"{imp.where()}: the spec layer imports {imp.target}")
    return bad


def hidden(imports: list[Import]) -> list[str]:
    return [
        f"{imp.where()}: {imp.module} imports {imp.target} inside a function"
        for imp in imports
        if not imp.top_level
        and (imp.module, imp.target) not in FUNCTION_LEVEL_ALLOWED
        and imp.target != "__future__"
    ]


def private_names(imports: list[Import], local: frozenset[str] = frozenset()) -> list[str]:
    """``from <project module> import _name``: a module taking another's private name. The
    project's modules are the three layers' and those whose top-level name is in ``local``
    (the test helpers'); a third party's private names (``torch._C``, ``_pytest``) are not
    the project's to make public."""
    return [
        f"{imp.where()}: {imp.module} imports {name} from {imp.target}"
        for imp in imports
        if layer_of(imp.target) is not None or imp.target.split(".")[0] in local
        for name in imp.names
        if name.startswith("_") and not name.startswith("__")
    ]


def cycles(imports: list[Import], known: set[str]) -> list[list[str]]:
    """The circles of imports between the project's modules (``known``), each as a list of
    modules. ``from package import module`` counts as an import of that module."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        targets = {f"{imp.target}.{n}" for n in imp.names} & known or {imp.target}
        graph.setdefault(imp.module, set()).update(t for t in targets if t in known and t != imp.module)
    # Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_imports_point_down_only() -> None:
    bad = upward(all_imports())
    assert not bad, "upward imports (layers: " + " <- ".join(LAYERS) + "):\n" + "\n".join(bad)


def test_spec_layer_imports_neither_torch_nor_upper_layers() -> None:
    bad = spec_layer_foreign(all_imports())
    assert not bad, "\n".join(bad)


def test_no_function_level_imports() -> None:
    bad = hidden(all_imports())
    assert not bad, (
        "move these imports to the top of the module, or add them to FUNCTION_LEVEL_ALLOWED "
        "in tests/test_layers.py with the reason:\n" + "\n".join(bad)
    )


def test_allowlist_entries_are_used() -> None:
    used = {(imp.module, imp.target) for imp in all_imports() if not imp.top_level}
    stale = sorted(set(FUNCTION_LEVEL_ALLOWED) - used)
    assert not stale, f"allowlisted function-level imports that no longer exist: {stale}"


def test_no_module_takes_another_s_private_name() -> None:
    """In the packages and in tests/ (which imports the packages and its own helpers)."""
    local = frozenset(m.split(".")[0] for m, _ in modules_under_tests())
    bad = private_names(all_imports() + imports_under_tests(), local)
    assert not bad, "make the name public, or move the code that needs it:\n" + "\n".join(bad)


def test_no_circle_of_imports() -> None:
    found = cycles(all_imports(), {m for m, _ in modules()})
    assert not found, "modules that import each other, directly or in a circle:\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_modules_stay_small() -> None:
    big = [
        f"{path.relative_to(REPO)}: {n} lines"
        for _, path in modules()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    assert not big, f"modules over {MAX_MODULE_LINES} lines (split by responsibility):\n" + "\n".join(big)


# The checks themselves, on planted source: each must catch what it names.


@pytest.mark.parametrize(
    ("module", "source", "check", "expected"),
    [
        ("autocast_spec.loader", "from reference_impl import policy\n", upward, "imports reference_impl"),
        ("reference_impl.cli.x", "from conformance.certify import bundle\n", upward, "imports conformance"),
        ("reference_impl.x", "from ..conformance import y\n", upward, "imports conformance"),
        ("autocast_spec.loader", "import torch\n", spec_layer_foreign, "imports torch"),
        ("autocast_spec.loader", "import yaml, json\n", spec_layer_foreign, None),
        (
            "conformance.checks",
            "def f():\n    from reference_impl import oracle\n",
            hidden,
            "inside a function",
        ),
        ("conformance.checks", "from reference_impl import oracle\n", hidden, None),
    ],
)
def test_checks_catch_planted_imports(
    tmp_path: Path, module: str, source: str, check: object, expected: str | None
) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    found = check(imports_of(module, path))  # type: ignore[operator]
    if expected is None:
        assert found == []
    else:
        assert found and expected in found[0], found


def test_the_private_name_check_catches_a_planted_import(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("from conformance.kit.case import _hidden, Case\nfrom os import _exit\n")
    assert private_names(imports_of("conformance.x", path)) == [
        f"{path}:1: conformance.x imports _hidden from conformance.kit.case"
    ]
    path.write_text("from mutation.catalogue import _helper\nfrom _pytest.fixtures import FixtureDef\n")
    assert private_names(imports_of("realbugs.cache", path), frozenset({"mutation", "realbugs"})) == [
        f"{path}:1: realbugs.cache imports _helper from mutation.catalogue"
    ]


def test_the_circle_check_catches_a_planted_circle(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("from pkg import b\n")
    b.write_text("from pkg.c import thing\n")
    c.write_text("import pkg.a\n")
    imports = imports_of("pkg.a", a) + imports_of("pkg.b", b) + imports_of("pkg.c", c)
    assert cycles(imports, {"pkg.a", "pkg.b", "pkg.c"}) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert cycles(imports[:2], {"pkg.a", "pkg.b", "pkg.c"}) == []

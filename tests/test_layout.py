"""The package's shape: subpackages import each other as a DAG, folders and modules stay small.

Imports are read from the source (module-level and function-level alike), so a lazy import
inside a function counts as much as one at the top of a file.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "fgrad"
MAX_MODULES_PER_FOLDER = 16
MAX_MODULE_LINES = 600
# The layers from the bottom up: a subpackage may import only those below it.
LAYERS = [{"fgrad.flags", "fgrad.profiler"}, {"fgrad.config"}, {"fgrad.core"},
          {"fgrad.transforms"}, {"fgrad.random", "fgrad.lax", "fgrad.numpy", "fgrad.distributed",
                                 "fgrad.debug", "fgrad.tree", "fgrad.flatten_util",
                                 "fgrad.typing"},
          {"fgrad.scipy"}, {"fgrad.lower"}, {"fgrad.nn"}, {"fgrad.optim"},
          {"fgrad.example_libraries"}]


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    base = PACKAGE.parent.joinpath(*dotted.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _imported(tree: ast.AST) -> list[str]:
    """Every fgrad module a source file imports (`from fgrad import x` names fgrad.x)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [f"{node.module}.{a.name}" for a in node.names
                       if _is_module(f"{node.module}.{a.name}")]
            found += modules if len(modules) == len(node.names) else [node.module, *modules]
    return [name for name in found if name == "fgrad" or name.startswith("fgrad.")]


def _unit(module: str, depth: int) -> str:
    return ".".join(module.split(".")[:depth])


def import_graph(depth: int, within: str = "fgrad") -> dict[str, set[str]]:
    """Edges between units (a module's first `depth` name parts), for modules under
    `within`; self-edges and imports leaving `within` are dropped."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        source = _module_name(path)
        if not source.startswith(within + ".") and source != within:
            continue
        unit = _unit(source, depth)
        targets = {_unit(t, depth) for t in _imported(ast.parse(path.read_text()))
                   if t.startswith(within + ".") or (t == within == "fgrad")}
        graph.setdefault(unit, set()).update(t for t in targets if t != unit)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a list of nodes, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        stack.pop()
        return None
    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_find_cycle_sees_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_subpackages_import_as_a_dag() -> None:
    graph = import_graph(depth=2)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between fgrad's subpackages: " + " -> ".join(cycle)


def test_subpackages_import_only_lower_layers() -> None:
    level = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
    graph = import_graph(depth=2)
    unplaced = sorted(set(graph) - set(level) - {"fgrad"})
    assert not unplaced, f"place these subpackages in LAYERS: {unplaced}"
    bad = [f"{a} -> {b}" for a, targets in graph.items() if a in level for b in targets
           if b not in level or level[b] >= level[a]]
    assert not bad, "imports against the layering " + str(LAYERS) + ": " + ", ".join(bad)


def test_lowering_rooms_import_as_a_dag() -> None:
    graph = import_graph(depth=3, within="fgrad.lower")
    graph.pop("fgrad.lower", None)  # the package's __init__ assembles the rooms
    assert find_cycle(graph) is None, find_cycle(graph)
    for backend in ("fgrad.lower.llvm", "fgrad.lower.opencl"):
        others = {"fgrad.lower.llvm", "fgrad.lower.opencl"} - {backend}
        assert not graph.get(backend, set()) & others, f"{backend} imports another backend"


@pytest.mark.parametrize("folder", sorted({p.parent for p in PACKAGE.rglob("*.py")}),
                         ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_folder_is_not_too_flat(folder: pathlib.Path) -> None:
    modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
    assert len(modules) <= MAX_MODULES_PER_FOLDER, \
        f"{folder.name}/ holds {len(modules)} modules; split it into rooms"


def test_modules_are_short() -> None:
    long = {str(p.relative_to(PACKAGE.parent)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"

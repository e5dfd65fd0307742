"""Dependencies between Parley's top-level parts point one way.

Each top-level subpackage or module of ``parley`` (``api``, ``pipeline``, ``runtime``,
``providers``, ``http``...) is a node, and every import from one into another is an
edge: at the top of a module, under ``if TYPE_CHECKING:`` and inside a function alike,
since each says the importer needs the imported. The graph has no cycle, so each part
can be read, tested and replaced from the bottom up: api → pipeline → runtime →
providers → http.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import parley

ROOT = Path(parley.__file__).parent


def _part(module: str) -> str | None:
    """The top-level part of ``parley`` a dotted module name is in, if it is in one."""
    names = module.split(".")
    if names[0] != "parley" or len(names) < 2:
        return None
    return names[1]


def _is_part(name: str) -> bool:
    return (ROOT / name / "__init__.py").exists() or (ROOT / f"{name}.py").exists()


def _module_name(path: Path) -> str:
    relative = path.relative_to(ROOT.parent).with_suffix("")
    names = list(relative.parts)
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names)


def _imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, wherever it is."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        base = node.module or ""
    else:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([node.module] if node.module else [])])
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _module_edges() -> Iterator[tuple[str, str]]:
    """(a module of ``parley``, a top-level part other than its own that it imports)."""
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        source = _part(module)
        if source is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _imports(tree):
            for name in _imported(module, path.name == "__init__.py", node):
                target = _part(name)
                if target is not None and target != source and _is_part(target):
                    yield module, target


def import_graph() -> dict[str, set[str]]:
    """Each top-level part of ``parley`` → the other parts its modules import."""
    graph: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        part = _part(_module_name(path))
        if part is not None:
            graph.setdefault(part, set())
    for module, target in _module_edges():
        graph[_part(module) or module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one part (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _path(graph: dict[str, set[str]], start: str, end: str) -> list[str]:
    """One chain of imports from ``start`` to ``end`` (breadth first), to name in a failure."""
    came_from: dict[str, str] = {start: start}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for other in sorted(graph.get(node, ())):
            if other not in came_from:
                came_from[other] = node
                queue.append(other)
    chain = [end]
    while chain[-1] != start:
        chain.append(came_from[chain[-1]])
    return chain[::-1]


def test_no_import_cycle_between_top_level_parts() -> None:
    graph = import_graph()
    found = cycles(graph)
    described = [
        " → ".join(_path(graph, group[0], group[1]) + _path(graph, group[1], group[0])[1:])
        for group in found
    ]
    assert not found, "import cycles between parts of parley: " + "; ".join(described)


def test_the_request_path_points_down() -> None:
    graph = import_graph()
    assert "api" not in graph["pipeline"]
    assert "pipeline" not in graph["providers"]
    assert {"api", "pipeline"}.isdisjoint(graph["runtime"])
    assert {"api", "pipeline", "providers"}.isdisjoint(graph["http"])


def test_a_cycle_is_found() -> None:
    """The check itself can fail: a graph with a loop of three parts is reported."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_gateway_never_loads_the_local_engines() -> None:
    """``parley.local`` (the engines and the demo) is a second program that the command
    line starts: ``parley serve --demo`` through ``parley.cli.demo``, ``parley engine`` by
    its name in the command table. No other module of the gateway imports it."""
    importers = {module for module, target in _module_edges() if target == "local"}
    assert importers == {"parley.cli.demo"}

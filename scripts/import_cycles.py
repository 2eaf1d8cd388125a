"""Fail when the modules of snodo/ import each other in a circle.

Every ``import`` counts: at module level, inside a function (a local import that dodges a
cycle is still a cycle) and under ``if TYPE_CHECKING:`` (a circle of types is a circle of
ideas). A package's lazy ``__getattr__`` exports do not count: they import nothing by name.
Run: ``python scripts/import_cycles.py`` (exit 1 with the circles printed, or exit 0).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "snodo"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The snodo modules ``path`` imports (a ``from pkg import mod`` names the module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def main() -> int:
    paths = sorted((ROOT / PACKAGE).rglob("*.py"))
    known = {module_name(p) for p in paths}
    graph = {module_name(p): imports_of(p, module_name(p), known) for p in paths}
    # A package imports its __init__ first: an edge to a parent package is not a circle of ours.
    for name, targets in graph.items():
        graph[name] = {t for t in targets if not name.startswith(t + ".")}
    found = cycles(graph)
    for component in found:
        print("import cycle:", " <-> ".join(component))
    if not found:
        print(f"no import cycle among {len(known)} modules of {PACKAGE}/")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())

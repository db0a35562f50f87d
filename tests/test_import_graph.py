"""Imports point one way (docs/architecture.md): no module of the project imports, at the top or
inside a function, a module that imports it back, directly or through others."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = (
    "analysis",
    "cli",
    "configs",
    "db",
    "envs",
    "flows",
    "harness_pool",
    "infra",
    "rl",
    "sandbox",
    "tasks",
    "ui",
)


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """The project modules `path` imports anywhere in its body (lazy imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names}
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    return {name: _imports(path, name, set(files)) for name, path in files.items()}


def test_no_import_circle_lazy_or_not():
    graph = import_graph()
    assert len(graph) > 150 and "envs.registry" in graph["harness_pool.operators"]  # the scan sees lazy imports too
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_the_sandbox_imports_nothing_of_the_project():
    graph = import_graph()
    assert all(dep.startswith("sandbox") for name, deps in graph.items() if name.startswith("sandbox") for dep in deps)

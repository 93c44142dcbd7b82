"""Imports run one way: `eval` may use `proxy` and `strategies`, `proxy` may use `strategies`, and `strategies`
neither; inside each package no module imports itself back through others. Read from the source (every import
statement, those inside functions and under TYPE_CHECKING included), so a lazy import cannot hide a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("proxy", "strategies", "eval")


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The modules of ours that `path` imports (`from pkg import name` counts as `pkg.name` when that is a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found & modules


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    return {name: imports_of(path, set(paths)) - {name} for name, path in paths.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan), package __init__ re-exports aside."""
    edges = {m: {t for t in targets if t not in PACKAGES} for m, targets in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_module_imports_itself_back() -> None:
    assert cycles(graph()) == []


@pytest.mark.parametrize(("package", "forbidden"), [("proxy", ("eval",)), ("strategies", ("proxy", "eval"))])
def test_packages_import_downwards_only(package: str, forbidden: tuple[str, ...]) -> None:
    upward = {
        (module, target)
        for module, targets in graph().items()
        if module.split(".")[0] == package
        for target in targets
        if target.split(".")[0] in forbidden
    }
    assert upward == set()


def test_tests_import_helpers_from_modules_never_from_conftest() -> None:
    """conftest.py holds fixtures, which pytest injects; shared helpers live in modules (tests/serving.py)."""
    importers = [
        path.relative_to(ROOT)
        for path in (ROOT / "tests").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("conftest")
    ]
    assert importers == []

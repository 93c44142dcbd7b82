"""Imports run one way: `eval` may use `proxy` and `strategies`, `proxy` may use `strategies`, and `strategies`
neither; inside each package no module imports itself back through others, and each room (sub-package) imports
only the rooms its `__init__.py` says it may. Read from the source (every import statement, those inside
functions and under TYPE_CHECKING included), so a lazy import cannot hide a cycle. No folder holds more than
MAX_MODULES modules side by side."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("proxy", "strategies", "eval")
MAX_MODULES = 20
"""Modules side by side in one folder: past about this many a reader no longer takes a room in at once."""
NEVER = {
    # Within proxy: routes sit above the edge and the upstream; the edge and the upstream know nothing of each
    # other, of the routes or of shadow; shadow runs beside the routes, never through them.
    "contextlift.proxy.edge": ("contextlift.proxy.routes", "contextlift.proxy.upstream", "contextlift.proxy.shadow"),
    "contextlift.proxy.upstream": ("contextlift.proxy.routes", "contextlift.proxy.edge", "contextlift.proxy.shadow"),
    "contextlift.proxy.shadow": ("contextlift.proxy.routes", "contextlift.proxy.edge"),
    "contextlift.proxy.observability": (
        "contextlift.proxy.routes",
        "contextlift.proxy.edge",
        "contextlift.proxy.upstream",
        "contextlift.proxy.shadow",
    ),
    # Within eval: a task builds cases; verdicts read samples; the report reads both; none reaches the runner.
    "contextlift.eval.tasks": (
        "contextlift.eval.verdicts",
        "contextlift.eval.report",
        "contextlift.eval.runner",
        "contextlift.eval.plan",
        "contextlift.eval.command",
    ),
    "contextlift.eval.verdicts": (
        "contextlift.eval.tasks",
        "contextlift.eval.report",
        "contextlift.eval.runner",
        "contextlift.eval.plan",
        "contextlift.eval.command",
    ),
    "contextlift.eval.report": ("contextlift.eval.runner", "contextlift.eval.plan", "contextlift.eval.command"),
    # Within strategies: finding documents knows nothing of what is done with them, and a strategy receives its
    # documents found; rankers rank what they are given.
    "contextlift.strategies.detection": ("contextlift.strategies.builtin", "contextlift.strategies.rankers"),
    "contextlift.strategies.builtin": ("contextlift.strategies.detection",),
    "contextlift.strategies.rankers": ("contextlift.strategies.detection", "contextlift.strategies.builtin"),
}
"""Room -> the rooms it must never import."""


def module_name(path: Path) -> str:
    """The installed name: the folders sit at the root and install under `contextlift` (pyproject.toml)."""
    parts = ("contextlift", *path.relative_to(ROOT).with_suffix("").parts)
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
    edges = {m: {t for t in targets if t.removeprefix("contextlift.") not in PACKAGES} for m, targets in edges.items()}
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
        if module.split(".")[1] == package
        for target in targets
        if target.split(".")[1] in forbidden
    }
    assert upward == set()


@pytest.mark.parametrize(("room", "forbidden"), sorted(NEVER.items()))
def test_rooms_import_only_what_their_docstring_allows(room: str, forbidden: tuple[str, ...]) -> None:
    crossing = {
        (module, target)
        for module, targets in graph().items()
        if module == room or module.startswith(room + ".")
        for target in targets
        if any(target == f or target.startswith(f + ".") for f in forbidden)
    }
    assert crossing == set()


def test_the_strategies_core_imports_none_of_its_rooms() -> None:
    """The request model, plugin surface, registry and pipeline sit under detection and the built-ins: only the
    package's face (`strategies/__init__.py`) re-exports from them."""
    rooms = ("contextlift.strategies.detection", "contextlift.strategies.builtin")
    core = {
        m for m in graph() if m.count(".") == 2 and m.startswith("contextlift.strategies.") and not m.startswith(rooms)
    }
    crossing = {(m, t) for m in core for t in graph()[m] if t.startswith(rooms)}
    assert crossing == set()


def test_every_room_says_what_lives_there_and_what_it_may_import() -> None:
    for package in PACKAGES:
        for init in (ROOT / package).rglob("__init__.py"):
            if not any(p.name != "__init__.py" for p in init.parent.glob("*.py")):
                continue  # a folder of data files (proxy/policies), no code to room
            doc = ast.get_docstring(ast.parse(init.read_text())) or ""
            assert "import" in doc, f"{init.relative_to(ROOT)}: its docstring says nothing of what it may import"


@pytest.mark.parametrize("top", [*PACKAGES, "tests"])
def test_no_folder_holds_more_than_a_reader_takes_in(top: str) -> None:
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]
        if (count := sum(1 for f in folder.glob("*.py") if f.name != "__init__.py")) > MAX_MODULES
    }
    assert crowded == {}


def test_tests_import_helpers_from_modules_never_from_conftest() -> None:
    """conftest.py holds fixtures, which pytest injects; shared helpers live in modules (tests/serving.py)."""
    importers = [
        path.relative_to(ROOT)
        for path in (ROOT / "tests").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("conftest")
    ]
    assert importers == []

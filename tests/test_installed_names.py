"""contextlift installs under one name. The folders `proxy/`, `strategies/` and `eval/` sit at the repository's root
and install as `contextlift.proxy`, `contextlift.strategies` and `contextlift.eval` (pyproject.toml's package-dir
mapping), so nothing of ours lands beside another distribution's `proxy` at the top of a user's environment."""

from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("proxy", "strategies", "eval")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The distribution as pip installs it from this tree (a regular wheel, not the editable one), built from a copy of
    the files git would commit: a build/ folder left in the tree by an older layout would be packed in too."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: which files a build takes is unknown")
    source = tmp_path_factory.mktemp("source")
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", str(out)]
    subprocess.run(
        [*command, str(source)], check=True, capture_output=True, env={**os.environ, "PYTHONWARNINGS": "ignore"}
    )
    [built] = out.glob("contextlift-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_installs_contextlift_alone_at_the_top(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist() if ".dist-info/" not in name}
    assert tops == {"contextlift"}


def test_the_wheel_holds_every_module_and_data_file_of_the_folders(wheel: zipfile.ZipFile) -> None:
    """A package added to a folder and not to pyproject.toml's list would be left out of the wheel silently."""
    tracked = subprocess.run(["git", "ls-files", *FOLDERS], cwd=ROOT, capture_output=True, text=True, check=True)
    expected = {f"contextlift/{name}" for name in tracked.stdout.split() if name.endswith((".py", ".toml", "py.typed"))}
    assert expected - set(wheel.namelist()) == set()


def test_every_entry_point_names_a_contextlift_module(wheel: zipfile.ZipFile) -> None:
    [name] = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(wheel.read(name).decode())
    targets = {value.split(":")[0] for section in parser.sections() for value in parser[section].values()}
    assert targets
    assert {t for t in targets if not t.startswith("contextlift.")} == set()


def test_nothing_imports_the_folders_by_their_bare_names() -> None:
    """Run from the root, `import proxy` would still work (the folder is on the path) and load a second copy of every
    module under another name: its settings, registries and error classes apart from the real ones."""
    bare = set(FOLDERS)
    found = []
    for path in sorted(ROOT.glob("**/*.py")):
        if any(part in {".venv", "build", ".git"} or part.startswith(".") for part in path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.split(".")[0] in bare]
    assert found == []


def test_serving_and_the_eval_load_no_module_under_a_bare_name() -> None:
    code = (
        "import sys, pkgutil, importlib\n"
        f"for top in {FOLDERS!r}:\n"
        "    package = importlib.import_module('contextlift.' + top)\n"
        "    for m in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(m.name)\n"
        f"assert not {{m.split('.')[0] for m in sys.modules}} & {set(FOLDERS)!r}, 'a bare name was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=300)

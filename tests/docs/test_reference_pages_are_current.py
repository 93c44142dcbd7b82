"""The reference pages committed under docs/reference/ are what the code gives now.

The site's build writes them afresh from the code (docs/hooks/reference.py); the committed copies are for readers
of the repository, whose links to them would otherwise lead nowhere. A change to a setting, strategy, error or metric
changes its page: `.venv/bin/python docs/hooks/reference.py` rewrites the copies.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "docs" / "hooks" / "reference.py"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", HOOK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGES = _hook().pages()


@pytest.mark.parametrize("path", sorted(PAGES))
def test_the_committed_reference_page_is_what_the_code_gives(path: str) -> None:
    committed = ROOT / "docs" / path
    assert committed.is_file(), f"docs/{path} is not committed: run .venv/bin/python docs/hooks/reference.py"
    assert committed.read_text(encoding="utf-8") == PAGES[path], (
        f"docs/{path} differs from what the code gives: run .venv/bin/python docs/hooks/reference.py and commit it"
    )


def test_the_rewrite_leaves_current_pages_alone(tmp_path: Path) -> None:
    hook = _hook()
    assert sorted(hook.write_pages(tmp_path)) == sorted(PAGES)
    assert hook.write_pages(tmp_path) == []
    assert {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.md")} == set(PAGES)


@pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None, reason="mkdocs is not "
                    "installed (the `docs` extra: pip install -e '.[docs]')")  # fmt: skip
def test_the_site_is_built_from_the_code_not_from_the_committed_copies(tmp_path: Path) -> None:
    root = tmp_path / "src"
    shutil.copytree(ROOT / "docs", root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    (root / "docs" / "reference" / "settings.md").write_text("# Settings\n\nA stale copy.\n", encoding="utf-8")
    build = subprocess.run(
        [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
        check=False,
    )
    assert build.returncode == 0, build.stderr
    built = (tmp_path / "site" / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    assert "A stale copy." not in built
    assert "CONTEXTLIFT_UPSTREAM_URL" in built

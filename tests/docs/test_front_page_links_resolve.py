"""The front page (README.md) and CONTRIBUTING.md as the code host shows them: every relative link leads to a file the
repository holds, and every `#anchor` to a heading of that file. The README stays a page read in two minutes, and
keeps the two set-up commands that `.ci/run` and the docs name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "CONTRIBUTING.md"]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as the code host and mkdocs' toc write it: lower case, code marks and punctuation gone."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def _relative_links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return [link for link in _LINK.findall(text) if not re.match(r"[a-z]+:", link)]


def test_slugs_are_written_as_the_code_host_writes_them() -> None:
    assert _slug("From nothing to a rule: shadow, probes, auto") == "from-nothing-to-a-rule-shadow-probes-auto"
    assert _slug("`excerpt`: the best passage quoted") == "excerpt-the-best-passage-quoted"


@pytest.mark.parametrize("name", PAGES)
def test_every_relative_link_resolves(name: str) -> None:
    page = ROOT / name
    links = _relative_links(page)
    assert links, f"{name} links nothing"
    for link in links:
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.is_file(), f"{name} links {link}: no such file in the repository"
        if anchor:
            assert anchor in _anchors(target), f"{name} links {link}: {path or name} has no such heading"


def test_the_readme_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for command in ("scripts/serve     #", "scripts/test      #", "scripts/serve --upstream "):
        assert re.search(rf"^{re.escape(command)}", text, flags=re.M), command
    assert "x-context-order: 3,1,2" in text

"""`contextlift serve --help` lists four flags of some seventy settings: it says where every setting is described,
and that page names every `CONTEXTLIFT_*` variable."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from contextlift.proxy.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parents[2]


def _help() -> str:
    ran = subprocess.run(
        [str(Path(sys.executable).parent / "contextlift"), "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return " ".join(ran.stdout.split())


def test_serve_help_names_the_pages_that_describe_every_setting() -> None:
    text = _help()
    named = re.findall(r"docs/[\w/.-]+\.md", text)
    assert "docs/reference/settings.md" in named
    assert "docs/configuration.md" in named
    assert all((ROOT / page).is_file() for page in named), named
    assert f"{ENV_PREFIX}<NAME>" in text


def test_the_page_serve_help_names_lists_every_contextlift_variable() -> None:
    page = (ROOT / "docs" / "reference" / "settings.md").read_text(encoding="utf-8")
    for name, field in Settings.model_fields.items():
        if field.validation_alias is None:
            assert f"{ENV_PREFIX}{name.upper()}" in page, name

"""A lift quoted on the core path (the README, Getting started) is one a current report gives: every signed
three-decimal figure there appears in the embedded models' tables (docs/results/models/index.md, written from
reports whose upstream is recorded), and none is quoted as "N points", a form no report prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "docs" / "results" / "models" / "index.md"
QUOTING = ["README.md", "docs/getting-started.md"]
_LIFT = re.compile(r"(?<![\d.])[+-]0\.\d{3}(?!\d)")


def _reported() -> set[str]:
    text = TABLES.read_text(encoding="utf-8")
    return set(_LIFT.findall(text))


def test_every_report_behind_the_tables_names_its_upstream() -> None:
    listed = [line for line in TABLES.read_text(encoding="utf-8").splitlines() if line.startswith("- [")]
    assert listed
    for line in listed:
        assert re.search(r"upstream `[0-9a-f]{16}`", line), f"a report without a recorded upstream: {line}"


@pytest.mark.parametrize("page", QUOTING)
def test_every_lift_quoted_is_in_a_current_report(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    quoted = set(_LIFT.findall(text))
    assert not quoted - _reported(), f"{page} quotes lifts no current report gives: {sorted(quoted - _reported())}"


@pytest.mark.parametrize("page", QUOTING)
def test_no_lift_is_quoted_in_points(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    assert not re.search(r"\d+(?:\.\d+)? points", text), f"{page}: quote a lift as a report prints it (+0.133)"

"""report.html renders what the markdown report writes: bold text as bold (a literal `**Smoke test**` before), and
a table wider than the page in a box of its own that scrolls, so no column is cut off at the page's edge."""

from __future__ import annotations

from pathlib import Path

from contextlift.eval.report.html import render_html


def test_bold_is_rendered_and_tables_scroll_in_their_own_box(tmp_path: Path) -> None:
    page = render_html(
        "**Smoke test** (profile `quick`): too few cases.\n\n| a | b |\n|---|---|\n| **yes** | `none` |\n"
    )
    assert "<p><strong>Smoke test</strong> (profile <code>quick</code>): too few cases.</p>" in page
    assert "**" not in page
    assert '<div class="wide"><table>' in page
    assert ".wide{overflow-x:auto" in page
    assert "<td><strong>yes</strong></td><td><code>none</code></td>" in page

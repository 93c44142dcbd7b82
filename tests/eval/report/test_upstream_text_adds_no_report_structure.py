"""What an upstream says of itself (its model id, its listing, its /props) reaches a report as text on one line in a
code span: no heading, image, list item, table cell or HTML of its own in report.md, and report.html reads no local
file but the plots its own run wrote."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from contextlift.eval.identity import UpstreamIdentity
from contextlift.eval.report.html import render_html
from contextlift.eval.report.publish import write_report
from contextlift.eval.verdicts.results import RunInfo
from tests.eval.report.test_best_pipeline_per_regime import sample

HOSTILE = "m`x\n![x](../secret.txt)\n<script>alert(1)</script>\n## owned\n| cell |**bold**"
SECRET = b"the operator's secret, not for any report"


def _code_spans_removed(line: str) -> str:
    return re.sub(r"`[^`\n]*`", "", line)


def test_a_hostile_model_id_and_listing_stay_text_in_both_reports(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_bytes(SECRET)
    folder = tmp_path / "report"
    identity = UpstreamIdentity(
        HOSTILE, {"listed": {"id": HOSTILE, "root": HOSTILE}, "server": {"build_info": HOSTILE}}
    )
    samples = [sample(s, "standard", i, float(i % 2)) for s in ("none", "reorder") for i in range(6)]
    info = RunInfo(HOSTILE, "http://proxy/v1", ("none", "reorder"), 0, "quick", (), {"litm-qa": {"title": "QA"}},
                   {identity.fingerprint: identity.to_json()})  # fmt: skip
    write_report(folder, samples, info)
    markdown = (folder / "report.md").read_text()
    for line in markdown.splitlines():
        bare = _code_spans_removed(line)
        assert not [word for word in ("secret", "script", "owned") if word in bare], line
        assert not line.startswith(("![x]", "<script", "## owned", "| cell")), line
    page = (folder / "report.html").read_text()
    assert "<script" not in page
    assert "<strong>bold</strong>" not in page
    assert base64.b64encode(SECRET).decode()[:20] not in page


def test_the_html_report_reads_no_file_its_run_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_bytes(SECRET)
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "own.png").write_bytes(b"\x89PNG own plot")
    markdown = "# report\n\n![own](plots/own.png)\n\n![x](../secret.txt)\n\n![y](secret.txt)\n"
    page = render_html(markdown, images={"plots/own.png": tmp_path / "plots" / "own.png"})
    assert base64.b64encode(b"\x89PNG own plot").decode() in page
    assert base64.b64encode(SECRET).decode()[:20] not in page
    assert "![x](../secret.txt)" in page  # shown as the text it is

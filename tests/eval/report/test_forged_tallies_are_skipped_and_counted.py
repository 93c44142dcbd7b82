"""A sink is a file anyone with the volume can write: a `shadow-tally` line whose limits are not finite, whose counts
are negative or hundreds of digits long, or whose outcome names carry Markdown or HTML is skipped and counted with the
other malformed lines, and the report is written from the tallies that hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextlift.proxy.cli import main

GOOD = {"kind": "shadow-tally", "run": "good", "time": "2026-01-01T00:00:00+00:00", "sampled": 5,
        "outcomes": {"evaluated": 3, "dropped-budget": 2}, "planned_calls": 4,
        "limits": {"calls_per_minute": 10, "tokens_per_minute": 1000, "queue": 8}}  # fmt: skip


def line(**changes: object) -> str:
    return json.dumps({**GOOD, **changes}, separators=(",", ":"))


FORGED = {
    "infinite limit": line(run="inf", limits={"calls_per_minute": 1e999, "tokens_per_minute": 1, "queue": 1}),
    "nan limit": line(run="nan", limits={"calls_per_minute": 10, "tokens_per_minute": 1, "queue": 1}).replace(
        '"tokens_per_minute":1', '"tokens_per_minute":NaN'
    ),
    "negative count": line(run="negative", outcomes={"evaluated": -1_000_000}),
    "huge count": line(run="huge", sampled=int("9" * 400)),
    "huge planned calls": line(run="planned", planned_calls=int("9" * 400)),
    "html outcome": line(run="html", outcomes={"<script>alert(1)</script>\n## owned": 1}),
}


@pytest.mark.parametrize("forged", list(FORGED))
def test_a_forged_tally_is_skipped_and_counted_and_the_report_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], forged: str
) -> None:
    sink = tmp_path / "shadow.jsonl"
    sink.write_text(f"{line()}\n{FORGED[forged]}\n")
    assert main(["shadow-report", str(sink), "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("5 sampled, 3 evaluated; not evaluated: 2 dropped-budget\n")
    assert "1 malformed lines skipped" in out
    report = (tmp_path / "report" / "report.md").read_text()
    assert "**5 sampled, 3 evaluated, 2 not evaluated**" in report
    assert "<script>" not in report
    assert "## owned" not in report
    assert "999999" not in report

"""Every committed report is what its samples give: `results.json` and `report.md` under docs/results/ are those
`contextlift eval-merge FOLDER --out FOLDER` writes from the folder's own `samples.jsonl` and `run.json` with this
version's code, so a change to how a report reads shows up here, not in a stale committed copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextlift.eval.report.markdown import render_markdown
from contextlift.eval.report.plots import draw
from contextlift.eval.report.publish import finite, read_info
from contextlift.eval.report.replay import stability_section
from contextlift.eval.verdicts.results import load_samples, results

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
REPORTS = sorted(p.parent for p in RESULTS.glob("*/samples.jsonl"))


def test_every_committed_report_is_checked() -> None:
    assert len(REPORTS) >= 8


@pytest.mark.parametrize("folder", REPORTS, ids=lambda p: p.name)
def test_the_committed_report_is_what_its_samples_give(folder: Path, tmp_path: Path) -> None:
    samples = load_samples([folder / "samples.jsonl"])
    data = finite(results(samples, read_info(folder)))
    assert data == json.loads((folder / "results.json").read_text()), "run: contextlift eval-merge FOLDER --out FOLDER"
    markdown = render_markdown(data, draw(data, tmp_path / "plots")) + "\n".join(stability_section(samples))
    assert markdown == (folder / "report.md").read_text()

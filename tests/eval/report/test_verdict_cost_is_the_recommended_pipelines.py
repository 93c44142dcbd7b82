"""The verdict's `calls x` and `latency x` are the cost of what the row recommends: where that is `none`, `none`'s
own 1.00, never the cost of the best strategy or one tied with it, and report.html shows the same cells as
report.md."""

from __future__ import annotations

from pathlib import Path

from contextlift.eval.cases import Sample
from contextlift.eval.report.html import render_html
from contextlift.eval.report.markdown import render_markdown
from contextlift.eval.verdicts.results import RunInfo, results
from tests.eval.report.test_best_pipeline_per_regime import sample as litm_sample

LATENCY_S = {"none": 1.0, "reorder": 2.0, "recite": 3.0}
CALLS = {"none": 1, "reorder": 1, "recite": 2}


def sample(strategy: str, variant: str, index: int, score: float) -> Sample:
    return litm_sample(strategy, variant, index, score, latency_s=LATENCY_S[strategy], calls=CALLS[strategy])


def report(tmp_path: Path) -> tuple[str, str]:
    # standard: reorder and recite each right on 3 of 15 where none is right on 1: tied at +0.133, 2 wins, no verdict.
    # hard: reorder right on all 12 where none is right on none (p = 2/4096); recite scores as none did.
    samples = [sample("none", "standard", i, float(i < 1)) for i in range(15)]
    samples += [sample(s, "standard", i, float(i < 3)) for s in ("reorder", "recite") for i in range(15)]
    samples += [sample("none", "hard", i, 0.0) for i in range(12)]
    samples += [sample("reorder", "hard", i, 1.0) for i in range(12)]
    samples += [sample("recite", "hard", i, 0.0) for i in range(12)]
    data = results(samples, RunInfo("m", "http://proxy/v1", ("none", "reorder", "recite"), 0, "full"))
    markdown = render_markdown(data)
    return markdown, render_html(markdown)


def test_a_row_that_recommends_none_shows_nones_own_cost_not_the_tied_best(tmp_path: Path) -> None:
    markdown, page = report(tmp_path)
    [standard] = [line for line in markdown.splitlines() if line.startswith("| litm-qa | standard |")]
    assert "| `none` | `reorder`, tied with `recite` | +0.133 |" in standard
    cells = [cell.strip() for cell in standard.strip("|").split("|")]
    assert cells[10:12] == ["1.00", "1.00"]  # calls x, latency x: none's own, not reorder's 1.00 and 2.00
    assert (
        "<td><code>none</code></td><td><code>reorder</code>, tied with <code>recite</code></td><td>+0.133</td>" in page
    )
    standard_html = page.split("<td>litm-qa</td><td>standard</td>", 1)[1].split("</tr>", 1)[0]
    assert "<td>1.00</td><td>1.00</td>" in standard_html


def test_a_row_that_recommends_a_strategy_shows_that_strategys_cost(tmp_path: Path) -> None:
    markdown, page = report(tmp_path)
    [hard] = [line for line in markdown.splitlines() if line.startswith("| litm-qa | hard |")]
    cells = [cell.strip() for cell in hard.strip("|").split("|")]
    assert cells[2] == "`reorder`"
    assert cells[10:12] == ["1.00", "2.00"]
    hard_html = page.split("<td>litm-qa</td><td>hard</td>", 1)[1].split("</tr>", 1)[0]
    assert "<td>1.00</td><td>2.00</td>" in hard_html

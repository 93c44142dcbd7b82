"""docs/results/index.md copies its figures from the committed reports: each table row's lift, interval,
wins/losses, p (Holm), n and verdict are those of the report it cites (its `results.json`), under the pipeline's
full name; every committed report is linked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from contextlift.eval.verdicts.best_pipeline import significant

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
PAGE = RESULTS / "index.md"
SAME_DEFAULTS = {
    "reorder; order=promote; ranker=minilm": "reorder; order=promote",
    "filter; margin=0.2; ranker=minilm, reorder; order=promote; top=1; ranker=minilm": "filter, reorder",
    "medoid; k=5; temperature=0.7": "medoid; k=5",
    "chain; chunk_tokens=4096; max_chunks=16; max_tokens=512": "chain",
}
"""Full names on the page of the pipelines the 2026-11-25 reports wrote with the defaults of the day."""
BEFORE_PROMOTE = {
    "reorder; order=edges-first; ranker=minilm": "reorder",
    "reorder; order=descending; ranker=minilm": "reorder; order=descending",
}
"""The report's `reorder` before promote became the default (2026-11-23), with MiniLM, the default ranker then."""
LABELS = {
    "reference-2": SAME_DEFAULTS,
    "reference-rankers": {"reorder; order=promote; ranker=minilm": "reorder; order=promote"},
    "reference-langchain-stuff": BEFORE_PROMOTE,
    "reference-langchain-chunks": {},
    "reference-focus-repeat": {},
    "reference-focus-chunks": {},
    "reference-unmovable": {},
    "reference-unmovable-chunks": {},
}
REGIMES = {"easy": "standard", "hard": "hard"}
PROBES, PROBES_HEADING = "probes", "Positional probes"
"""A shadow report's probe table (its probes.json), in its own section of the page."""


def rows(start: str = "| `") -> list[tuple[str, str, list[str]]]:
    """(report, variant, cells) of each table row on the page that starts with `start`, with the report and regime
    it sits under."""
    found = []
    report = variant = ""
    for line in PAGE.read_text().splitlines():
        if line.startswith("### "):
            regime = (v for word, v in REGIMES.items() if f"{word} distractors" in line)
            variant = PROBES if PROBES_HEADING in line else next(regime)
        elif line.startswith(start):
            found.append((report, variant, [c.strip() for c in line.strip("|").split("|")]))
        elif match := re.search(r"\[([\w-]+)\]\(\1/report\.md\)", line):
            report = match[1]
    return found


def lift_rows(report: str) -> dict[tuple[str, str], dict[str, Any]]:
    results = json.loads((RESULTS / report / "results.json").read_text())
    return {(r["variant"], r["strategy"]): r for r in results["lift"] if r["size"] in (None, "all")}


def test_every_table_row_is_its_reports_figures() -> None:
    checked = 0
    for report, variant, cells in rows():
        if variant == PROBES:
            check_probe_row(report, cells)
            continue
        pipeline, lift, ci, wins_losses, p, n, holds = cells
        full = re.match(r"`([^`]+)`", pipeline)
        assert full, pipeline
        label = LABELS[report].get(full[1], full[1])
        row = lift_rows(report)[(variant, label)]
        low, high = row["ci95"]
        assert lift == f"{row['value']:+.3f}", (report, pipeline)
        assert ci == f"[{low:+.3f}, {high:+.3f}]", (report, pipeline)
        assert wins_losses == f"{row['wins']}/{row['losses']}", (report, pipeline)
        assert p == f"{row['p_holm']:.2g} /{row['family']}", (report, pipeline)
        assert n == str(row["n"]), (report, pipeline)
        assert (holds == "yes") == significant(row), (report, pipeline)
        checked += 1
    assert checked >= 18, "the tables of the page were not found"


def test_every_row_split_by_the_ranker_is_its_reports_figures() -> None:
    """A row of a table split by whether the ranker was right (`| right |`, `| wrong |`): the pairs, lift,
    interval, wins/losses, p (Holm) and A/A floor of that half in the report's `ranker_split`."""
    checked = 0
    for report, variant, cells in rows("| right |") + rows("| wrong |"):
        half, pipeline, n, lift, ci, wins_losses, p, floor = cells
        strategy = re.match(r"`([^`]+)`", pipeline)
        assert strategy, pipeline
        split = json.loads((RESULTS / report / "results.json").read_text())["ranker_split"]
        (row,) = [r for r in split if (r["variant"], r["strategy"], r["half"]) == (variant, strategy[1], half)]
        assert n == str(row["n"]), (report, pipeline, half)
        if row["n"]:
            low, high = row["ci95"]
            assert lift == f"{row['value']:+.3f}", (report, pipeline, half)
            assert ci == f"[{low:+.3f}, {high:+.3f}]", (report, pipeline, half)
            assert p == f"{row['p_holm']:.2g} /{row['family']}", (report, pipeline, half)
        assert wins_losses == f"{row['wins']}/{row['losses']}", (report, pipeline, half)
        assert floor == ("-" if row["floor"] is None else f"{row['floor']:.3f} ({row['reasked']})")
        checked += 1
    assert checked >= 12, "the split tables of the page were not found"


def check_probe_row(report: str, cells: list[str]) -> None:
    """A probe table's row: accuracy first / middle / last with its interval, the U's depth, n, as probes.json."""
    (group,) = json.loads((RESULTS / report / "probes.json").read_text())["groups"]
    pipeline, first, middle, last, depth, n = cells
    strategy = re.match(r"`([^`]+)`", pipeline)
    assert strategy, pipeline
    at = {a["position"]: a for a in group["accuracy"] if a["strategy"] == strategy[1]}
    for position, cell in zip(("first", "middle", "last"), (first, middle, last), strict=True):
        low, high = at[position]["ci95"]
        assert cell == f"{at[position]['value']:.2f} [{low:.2f}, {high:.2f}]", (report, pipeline, position)
    u = group["u_depth"][strategy[1]]
    assert depth == f"{u['value']:+.3f} [{u['ci95'][0]:+.2f}, {u['ci95'][1]:+.2f}]", (report, pipeline)
    assert n == str(group["probes"])


def test_every_committed_report_is_linked() -> None:
    text = PAGE.read_text()
    reports = {p.parent.name for p in RESULTS.glob("*/report.md")}
    assert reports
    assert {r for r in reports if f"]({r}/report.md)" not in text} == set()


def test_each_report_cited_names_the_upstream_that_answered_it_or_says_it_was_not_recorded() -> None:
    """The paragraph that links a report names each upstream of its run.json by fingerprint, or, for a run from
    before upstreams were recorded, says so: a reader sees which figures rest on one upstream's answers."""
    paragraphs = PAGE.read_text().split("\n\n")
    checked = 0
    for report in sorted(p.parent.name for p in RESULTS.glob("*/run.json")):
        cited = [p for p in paragraphs if f"[{report}]({report}/report.md)" in p]
        assert cited, f"{report} is not cited"
        upstreams = json.loads((RESULTS / report / "run.json").read_text()).get("upstreams") or {}
        for paragraph in cited:
            if upstreams:
                assert all(f"upstream `{fingerprint}`" in paragraph for fingerprint in upstreams), report
            else:
                assert "upstream not recorded" in paragraph, report
            checked += 1
    assert checked >= 8

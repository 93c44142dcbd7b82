"""Effective length on hand-checked scores: the longest length up to which a strategy keeps 85% of its score
at the shortest length, in results.json and in report.md."""

from __future__ import annotations

from typing import Any

import pytest

from contextlift.eval.cases import Sample
from contextlift.eval.report.markdown import render_markdown
from contextlift.eval.verdicts.effective_length import effective_lengths
from contextlift.eval.verdicts.results import RunInfo, results

VARIANT = "varsum, whitespace"
SIZES = (0, 1000, 2000, 4000)
CORRECT = {
    # strategy: per size, how many of 10 samples are right at evidence depth 0 and at depth 100
    # (at 0 tokens there is no distraction to put the evidence after: depth 0 only, as the task builds it).
    "none": {0: (10,), 1000: (9, 9), 2000: (8, 9), 4000: (5, 5)},
    "recite": {0: (8,), 1000: (6, 6), 2000: (8, 8), 4000: (8, 8)},
    "reorder": {0: (0,), 1000: (3, 3), 2000: (3, 3), 4000: (3, 3)},
    "fact": {0: (5,), 1000: (5, 5), 2000: (5, 5), 4000: (5, 5)},
}


def sample(strategy: str, size: int, depth: int, index: int, score: float) -> Sample:
    return Sample.of(
        {
            "task": "length",
            "variant": VARIANT,
            "size": size,
            "position": depth,
            "sample": index,
            "strategy": strategy,
            "case": f"length|{VARIANT}|{size}|{depth}|{index}",
            "score": score,
            "error": None,
            "latency_s": 1.0,
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "upstream_calls": 1,
            "applied": strategy,
        }
    )


@pytest.fixture
def data() -> dict[str, Any]:
    samples = [
        sample(strategy, size, depth, i, float(i < correct))
        for strategy, by_size in CORRECT.items()
        for size, per_depth in by_size.items()
        for depth, correct in zip((0, 100), per_depth, strict=False)
        for i in range(10)
    ]
    info = RunInfo(
        "m",
        "http://proxy/v1",
        tuple(CORRECT),
        0,
        "quick",
        tasks={"length": {"title": "Context length", "size_unit": "distraction tokens", "position_unit": "depth %"}},
    )
    return results(samples, info)


def row(data: dict[str, Any], strategy: str) -> dict[str, Any]:
    return next(r for r in data["effective_length"] if r["strategy"] == strategy)


def test_the_longest_length_every_shorter_one_keeping_85_percent_of_the_base(data: dict[str, Any]) -> None:
    # none: base 1.0, threshold 0.85; 1000 keeps 0.9, 2000 keeps 17/20 = 0.85 exactly, 4000 drops to 0.5.
    none = row(data, "none")
    assert (none["base_size"], none["base_score"], none["threshold"]) == (0, 1.0, pytest.approx(0.85))
    assert [(s["size"], s["value"], s["n"]) for s in none["scores"]] == [
        (0, 1.0, 10),
        (1000, pytest.approx(0.9), 20),
        (2000, pytest.approx(0.85), 20),
        (4000, pytest.approx(0.5), 20),
    ]
    assert (none["effective_length"], none["first_below"], none["note"]) == (2000, 4000, None)


def test_a_recovery_after_a_drop_does_not_count(data: dict[str, Any]) -> None:
    # recite: base 0.8, threshold 0.68; 0.6 at 1000, back to 0.8 at 2000 and 4000.
    recite = row(data, "recite")
    assert recite["threshold"] == pytest.approx(0.68)
    assert (recite["effective_length"], recite["first_below"]) == (None, 1000)
    assert recite["note"] == "below 85% already at 1000"


def test_a_base_score_of_zero_has_no_effective_length(data: dict[str, Any]) -> None:
    reorder = row(data, "reorder")
    assert (reorder["base_score"], reorder["effective_length"], reorder["note"]) == (0.0, None, "base score is 0")


def test_keeping_every_length_gives_the_longest_measured_as_a_lower_bound(data: dict[str, Any]) -> None:
    fact = row(data, "fact")
    assert (fact["effective_length"], fact["first_below"]) == (4000, None)
    assert fact["note"] == "kept at every length measured"


def test_a_score_of_exactly_85_percent_keeps_it_whichever_way_the_floats_round() -> None:
    # 17/116 is 0.85 * 5/29 exactly, but the floats compute 0.85 * (5/29) one bit above 17/116.
    cells = [
        {"task": "length", "variant": "v", "strategy": "none", "size": 0, "position": 0, "value": 5 / 29, "n": 29},
        {"task": "length", "variant": "v", "strategy": "none", "size": 500, "position": 0, "value": 17 / 116, "n": 116},
    ]
    assert effective_lengths(cells)[0]["effective_length"] == 500


def test_one_length_and_other_tasks() -> None:
    one = {"task": "length", "variant": "v", "strategy": "none", "size": 0, "position": 0, "value": 1.0, "n": 5}
    assert effective_lengths([one])[0]["note"] == "one length only"
    assert effective_lengths([{**one, "task": "litm-qa"}, {**one, "task": "litm-qa", "size": 20}]) == []


def test_report_shows_the_table_in_nolima_layout(data: dict[str, Any]) -> None:
    markdown = render_markdown(data)
    section = markdown.split("### Effective length\n", 1)[1].split("\n### ", 1)[0]
    assert "NoLiMa (Modarressi et al. 2025" in section
    assert "RULER's absolute one (Hsieh et al. 2024" in section
    assert "| variant | strategy | effective length | base (85%) | 0 | 1000 | 2000 | 4000 |" in section
    lines = [line for line in section.splitlines() if line.startswith(f"| {VARIANT} |")]
    assert lines == [
        f"| {VARIANT} | none | 2000 | 1.000 (0.850) | 1.000 | 0.900 | 0.850 | 0.500 |",
        f"| {VARIANT} | recite | n/a (below 85% already at 1000) | 0.800 (0.680) | 0.800 | 0.600 | 0.800 | 0.800 |",
        f"| {VARIANT} | reorder | n/a (base score is 0) | 0.000 (0.000) | 0.000 | 0.300 | 0.300 | 0.300 |",
        f"| {VARIANT} | fact | 4000 (kept at every length measured) | 0.500 (0.425) | 0.500 | 0.500 | 0.500 | 0.500 |",
    ]

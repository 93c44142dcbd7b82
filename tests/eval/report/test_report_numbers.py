"""The report's statistics on hand-checked numbers, and the report files agreeing with the samples."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from contextlift.eval.cases import Sample
from contextlift.eval.report.publish import write_report
from contextlift.eval.verdicts.results import RunInfo, load_samples
from contextlift.eval.verdicts.stats import estimate, gap_recovered, paired_bootstrap, wilson


def test_estimate_is_mean_with_sample_stderr_and_wilson_interval() -> None:
    value = estimate([1, 1, 0, 0])
    assert value.value == 0.5
    assert value.stderr == pytest.approx(0.288675, abs=1e-6)  # sqrt(1/3) / 2
    assert (value.low, value.high) == pytest.approx((0.150, 0.850), abs=1e-3)
    assert wilson(0.0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    fractional = estimate([0.5, 1.0])
    assert fractional.low == pytest.approx(0.75 - 1.959964 * 0.25)


def test_paired_bootstrap_centres_on_the_mean_difference() -> None:
    lift = paired_bootstrap([1, 1, 1, 0] * 10, [0, 1, 0, 0] * 10)
    assert lift.value == pytest.approx(0.5)
    assert lift.low < 0.5 < lift.high
    assert lift.low > 0.3
    assert lift.high < 0.7
    same = paired_bootstrap([1, 0, 1], [1, 0, 1])
    assert (same.value, same.low, same.high) == (0, 0, 0)


def test_gap_recovered_as_the_issue_defines_it() -> None:
    baseline = {0: 0.9, 4: 0.3, 9: 0.7}
    assert gap_recovered({0: 0.9, 4: 0.6, 9: 0.8}, baseline) == pytest.approx(0.5)
    assert gap_recovered({0: 0.9, 4: 0.9, 9: 0.9}, baseline) == pytest.approx(1.0)
    assert gap_recovered({0: 0.2, 4: 0.5, 9: 0.8}, baseline) == pytest.approx(-1 / 6)
    assert gap_recovered({0: 1.0, 4: 1.0}, {0: 0.5, 4: 0.5}) is None


def sample(
    strategy: str, position: int | None, index: int, score: float, variant: str = "standard", prompt_tokens: int = 100
) -> Sample:
    return Sample.of(
        {
            "task": "litm-qa",
            "variant": variant,
            "size": 10,
            "position": position,
            "sample": index,
            "strategy": strategy,
            "case": f"litm-qa|{variant}|10|{position}|{index}",
            "prompt_hash": "x",
            "metric": "best_subspan_em",
            "gold": ["a"],
            "answer": "a" if score else "b",
            "score": score,
            "latency_s": 1.0 + (strategy != "none"),
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 5,
            "upstream_calls": 1 if strategy == "none" else 2,
            "applied": strategy,
            "status": 200,
            "error": None,
            "cached": False,
        }
    )


@pytest.fixture
def report(tmp_path: Path) -> Path:
    # none: 0.8 at the edges, 0.2 in the middle; reorder: 0.8, 0.6, 0.8 on the same cases.
    rows = []
    for i in range(5):
        for position, none_score, reorder_score in ((0, i < 4, i < 4), (4, i < 1, i < 3), (9, i < 4, i < 4)):
            rows += [
                sample("none", position, i, float(none_score)),
                sample("reorder", position, i, float(reorder_score)),
            ]
        # The baselines' prompts are shorter: they must not count in the cost of `none`.
        rows.append(sample("none", None, i, float(i < 1), "closed-book", prompt_tokens=10))
        rows.append(sample("none", None, i, 1.0, "oracle", prompt_tokens=20))
    info = RunInfo(
        "m",
        "http://proxy/v1",
        ("none", "reorder"),
        0,
        "quick",
        ("a note",),
        {"litm-qa": {"title": "QA", "size_unit": "documents", "position_unit": "gold index"}},
    )
    write_report(tmp_path, rows, info)
    return tmp_path


def test_every_report_file_is_written(report: Path) -> None:
    names = {p.name for p in report.iterdir()}
    assert {"samples.jsonl", "results.json", "report.md", "report.html", "run.json", "plots"} <= names
    assert (report / "plots" / "litm_qa-standard-10-position.png").read_bytes().startswith(b"\x89PNG")
    page = (report / "report.html").read_text()
    assert "data:image/png;base64," in page
    assert 'src="plots/' not in page
    assert "<table>" in page


def test_results_and_markdown_agree_with_the_samples(report: Path) -> None:
    samples = load_samples([report / "samples.jsonl"])
    results = json.loads((report / "results.json").read_text())
    markdown = (report / "report.md").read_text()
    for cell in results["accuracy"]:
        scores = [
            s.score
            for s in samples
            if (s.variant, s.strategy, s.position) == (cell["variant"], cell["strategy"], cell["position"])
        ]
        assert cell["value"] == pytest.approx(sum(scores) / len(scores))
        assert cell["n"] == len(scores)
    none_middle = next(c for c in results["accuracy"] if c["strategy"] == "none" and c["position"] == 4)
    assert none_middle["value"] == pytest.approx(0.2)
    row = re.search(r"^\| none \| (.*) \| 15 \|$", markdown, re.MULTILINE)
    assert row is not None
    assert row[1].split(" | ") == ["0.800 ± 0.200", "0.200 ± 0.200", "0.800 ± 0.200"]
    lift = next(r for r in results["lift"] if r["strategy"] == "reorder" and r["size"] is None)
    assert lift["value"] == pytest.approx(2 / 15)
    assert "| standard | reorder | all | +0.133 |" in markdown
    gap = next(r for r in results["gap_recovered"] if r["strategy"] == "reorder")
    assert gap["value"] == pytest.approx((0.6 - 0.2) / (0.8 - 0.2))
    cost = next(r for r in results["cost"] if r["strategy"] == "reorder")
    assert (cost["calls_vs_none"], cost["p50_s_vs_none"], cost["tokens_vs_none"]) == (2.0, 2.0, 1.0)
    none_cost = next(r for r in results["cost"] if r["strategy"] == "none")
    assert (none_cost["tokens"], none_cost["n"]) == (105, 15)
    assert "- a note" in markdown


def test_shards_merge_into_the_same_numbers(report: Path, tmp_path: Path) -> None:
    samples = load_samples([report / "samples.jsonl"])
    half = len(samples) // 2
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, part in ((first, samples[:half]), (second, samples[half:])):
        folder.mkdir()
        (folder / "samples.jsonl").write_text("".join(json.dumps(s.to_json()) + "\n" for s in part))
    merged = load_samples([first / "samples.jsonl", second / "samples.jsonl", first / "samples.jsonl"])
    assert sorted(json.dumps(s.to_json(), sort_keys=True) for s in merged) == sorted(
        json.dumps(s.to_json(), sort_keys=True) for s in samples
    )

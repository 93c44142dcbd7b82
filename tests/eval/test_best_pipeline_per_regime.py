"""The best pipeline per regime (task x variant) on hand-checked lifts: the highest lift over `none`, whether
its interval excludes zero, ties, and regimes where nothing lifts; in results.json and in report.md."""

from __future__ import annotations

from typing import Any

import pytest

from eval.best_pipeline import best_pipeline_section, best_pipelines
from eval.cases import Sample
from eval.report import render_markdown
from eval.results import RunInfo, results

ORDER = ("none", "reorder", "recite", "fact")


def lift(
    strategy: str, value: float, low: float, high: float, variant: str = "standard", n: int = 30
) -> dict[str, Any]:
    return {
        "task": "litm-qa",
        "variant": variant,
        "size": None,
        "strategy": strategy,
        "value": value,
        "n": n,
        "stderr": 0.05,
        "ci95": [low, high],
    }


def best(*lifts: dict[str, Any]) -> dict[str, Any]:
    [row] = best_pipelines(lifts, ORDER)
    return row


def test_the_highest_lift_whose_interval_excludes_zero_is_significant() -> None:
    row = best(lift("reorder", 0.3, 0.2, 0.4), lift("recite", 0.1, 0.05, 0.15), lift("fact", -0.1, -0.2, 0.0))
    assert (row["strategy"], row["value"], row["ci95"], row["n"]) == ("reorder", 0.3, [0.2, 0.4], 30)
    assert (row["verdict"], row["tied_with"]) == ("significant", [])
    assert (row["above_zero"], row["below_zero"]) == (["reorder", "recite"], [])
    assert (
        "| litm-qa | standard | `reorder` | `reorder` | +0.300 | [+0.200, +0.400] | 30 | - | - | significant: the "
        "interval excludes zero |" in (best_pipeline_section([row]))
    )


def test_an_interval_that_takes_in_zero_is_not_significant() -> None:
    row = best(lift("reorder", 0.1, -0.02, 0.2), lift("recite", 0.05, -0.05, 0.15))
    assert (row["strategy"], row["verdict"], row["above_zero"]) == ("reorder", "not significant", [])
    assert best_pipeline_section([row])[-2].endswith("| no strategy's lift is distinguishable from zero |")


def test_a_smaller_lift_that_excludes_zero_is_named_when_the_highest_does_not() -> None:
    row = best(lift("reorder", 0.1, -0.02, 0.22), lift("fact", 0.08, 0.01, 0.15))
    assert (row["strategy"], row["verdict"], row["above_zero"]) == ("reorder", "not significant", ["fact"])
    assert best_pipeline_section([row])[-2].endswith("| not significant; significant with a smaller lift: `fact` |")


def test_equal_lifts_go_to_the_higher_lower_bound_and_name_the_tie() -> None:
    row = best(lift("reorder", 0.2, -0.01, 0.4), lift("recite", 0.2, 0.1, 0.3), lift("fact", 0.1, 0.05, 0.15))
    assert (row["strategy"], row["tied_with"], row["verdict"]) == ("recite", ["reorder"], "significant")
    same = best(lift("fact", 0.2, 0.1, 0.3), lift("recite", 0.2, 0.1, 0.3))
    assert (same["strategy"], same["tied_with"]) == ("recite", ["fact"])  # then the run's order
    assert "| `recite`, tied with `fact` |" in best_pipeline_section([same])[-2]


def test_when_no_strategy_lifts_none_is_the_best_pipeline() -> None:
    row = best(lift("reorder", -0.05, -0.12, 0.02), lift("recite", -0.2, -0.3, -0.1), lift("fact", -0.3, -0.4, -0.2))
    assert (row["strategy"], row["verdict"], row["below_zero"]) == ("reorder", "no lift", ["recite", "fact"])
    assert best_pipeline_section([row])[-2] == (
        "| litm-qa | standard | `none` | `none` (highest: `reorder`) | -0.050 | [-0.120, +0.020] | 30 | - | - | "
        "no strategy lifts; `recite`, `fact` significantly below `none` |"
    )
    flat = best(lift("reorder", 0.0, 0.0, 0.0), lift("recite", 0.0, 0.0, 0.0))
    assert (flat["strategy"], flat["verdict"], flat["tied_with"]) == ("reorder", "no lift", ["recite"])
    assert best_pipeline_section([flat])[-2].endswith(
        "| cannot rank on this model: every strategy scored as `none` did |"
    )


def test_the_verdict_leads_with_cost_and_puts_unrankable_regimes_last() -> None:
    rankable = best(lift("reorder", 0.3, 0.2, 0.4))
    flat = {**best(lift("reorder", 0.0, 0.0, 0.0, variant="aaa")), "task": "litm-kv"}
    cost = [{"task": "litm-qa", "strategy": "reorder", "calls_vs_none": 1.0, "p50_s_vs_none": 1.25}]
    table = best_pipeline_section([flat, rankable], cost)
    assert table[0] == "## Verdict"
    assert table[-3].startswith(
        "| litm-qa | standard | `reorder` | `reorder` | +0.300 | [+0.200, +0.400] | 30 | 1.00 | 1.25 |"
    )
    assert table[-2].startswith("| litm-kv | aaa | `none` |")


def test_one_row_per_task_and_variant_from_the_lifts_over_all_sizes() -> None:
    rows = best_pipelines(
        [
            lift("reorder", 0.3, 0.2, 0.4),
            {**lift("recite", 0.9, 0.8, 1.0), "size": 20},  # one size only: not the regime's lift
            lift("recite", 0.1, -0.1, 0.3, variant="hard"),
        ],
        ORDER,
    )
    assert [(r["variant"], r["strategy"]) for r in rows] == [("hard", "recite"), ("standard", "reorder")]
    section = best_pipeline_section(rows)
    assert section[0] == "## Verdict"
    assert [line.split(" | ")[1] for line in section if line.startswith("| litm-qa")] == ["standard", "hard"]


def sample(strategy: str, variant: str, index: int, score: float) -> Sample:
    return Sample.of(
        {
            "task": "litm-qa",
            "variant": variant,
            "size": 10,
            "position": 4,
            "sample": index,
            "strategy": strategy,
            "case": f"litm-qa|{variant}|10|4|{index}",
            "score": score,
            "error": None,
            "latency_s": 1.0,
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "upstream_calls": 1,
            "applied": strategy,
        }
    )


def test_results_json_and_report_name_the_best_pipeline_from_the_samples() -> None:
    # standard: none right on 1 of 15, reorder on 3 of 15 (the same case and 2 more): lift 2/15. A resample of
    # the 15 pairs misses both +1 differences with probability (13/15)^15 = 0.117 > 2.5%, so the interval's
    # lower bound is 0: not significant. hard: reorder right on all 10 where none is right on none: +1 [1, 1].
    samples = [sample("none", "standard", i, float(i < 1)) for i in range(15)]
    samples += [sample("reorder", "standard", i, float(i < 3)) for i in range(15)]
    samples += [sample("none", "hard", i, 0.0) for i in range(10)]
    samples += [sample("reorder", "hard", i, 1.0) for i in range(10)]
    info = RunInfo("m", "http://proxy/v1", ("none", "reorder"), 0, "quick")
    data = results(samples, info)
    by_variant = {r["variant"]: r for r in data["best_pipeline"]}
    standard, hard = by_variant["standard"], by_variant["hard"]
    assert standard["value"] == pytest.approx(2 / 15)
    assert standard["ci95"][0] == 0.0
    assert (standard["strategy"], standard["verdict"], standard["n"]) == ("reorder", "not significant", 15)
    assert (hard["value"], hard["ci95"], hard["verdict"]) == (1.0, [1.0, 1.0], "significant")
    markdown = render_markdown(data)
    # The verdict opens the report, before every task's section.
    assert markdown.index("## Verdict") < markdown.index("## litm-qa")
    assert "| litm-qa | standard | `none` | `reorder` | +0.133 | [+0.000, " in markdown
    assert (
        "| litm-qa | hard | `reorder` | `reorder` | +1.000 | [+1.000, +1.000] | 10 | 1.00 | 1.00 | significant"
        in markdown
    )

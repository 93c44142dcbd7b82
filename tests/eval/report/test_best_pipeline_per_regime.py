"""The best pipeline per regime (task x variant) on hand-checked lifts: the highest lift over `none`, whether it
holds (exact paired test, enough pairs that differ, Holm's correction over the regime), ties, and regimes where
nothing lifts; in results.json and in report.md."""

from __future__ import annotations

from typing import Any

import pytest

from contextlift.eval.cases import Sample
from contextlift.eval.report.markdown import render_markdown
from contextlift.eval.verdicts.best_pipeline import best_pipeline_section, best_pipelines
from contextlift.eval.verdicts.results import RunInfo, results
from contextlift.eval.verdicts.stats import holm, sign_test

ORDER = ("none", "reorder", "recite", "fact")


def lift(
    strategy: str,
    wins: int,
    losses: int,
    low: float,
    high: float,
    variant: str = "standard",
    n: int = 30,
) -> dict[str, Any]:
    return {
        "task": "litm-qa",
        "variant": variant,
        "size": None,
        "strategy": strategy,
        "value": (wins - losses) / n,
        "n": n,
        "stderr": 0.05,
        "ci95": [low, high],
        "wins": wins,
        "losses": losses,
        "p": sign_test(wins, losses),
    }


def family(*rows: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows with Holm's correction over them, as contextlift.eval.verdicts.results computes it for one regime."""
    return [
        {**row, "p_holm": p, "family": len(rows)} for row, p in zip(rows, holm([r["p"] for r in rows]), strict=True)
    ]


def best(*lifts: dict[str, Any]) -> dict[str, Any]:
    [row] = best_pipelines(family(*lifts), ORDER)
    return row


def test_the_highest_lift_that_holds_after_holm_is_significant() -> None:
    # reorder 12/0 of 30: p = 0.00049, x3 = 0.0015; recite 9/1: p = 0.021, x2 = 0.043; fact 0/3.
    row = best(lift("reorder", 12, 0, 0.2, 0.55), lift("recite", 9, 1, 0.05, 0.45), lift("fact", 0, 3, -0.2, 0.0))
    assert (row["strategy"], row["value"], row["n"], row["verdict"]) == ("reorder", 0.4, 30, "significant")
    assert (row["wins"], row["losses"], row["family"]) == (12, 0, 3)
    assert row["p_holm"] == pytest.approx(3 * 2 / 2**12)
    assert (row["above_zero"], row["below_zero"], row["recommend"]) == (["reorder", "recite"], [], "reorder")
    assert (
        "| litm-qa | standard | `reorder` | `reorder` | +0.400 | [+0.200, +0.550] | 12/0 | 0.0015 /3 | 30 | "
        in best_pipeline_section([row])[-2]
    )
    assert best_pipeline_section([row])[-2].endswith("| significant: holds after Holm's correction |")


def test_a_lift_that_fails_the_correction_is_not_significant() -> None:
    # 12/3: p = 0.035 alone, 0.070 after Holm over two.
    row = best(lift("reorder", 12, 3, 0.02, 0.5), lift("recite", 5, 3, -0.1, 0.2))
    assert (row["strategy"], row["verdict"], row["above_zero"], row["recommend"]) == (
        "reorder",
        "not significant",
        [],
        None,
    )
    assert best_pipeline_section([row])[-2].endswith("| no strategy's lift is distinguishable from zero |")


def test_too_few_pairs_that_differ_are_never_significant() -> None:
    # 9/0 alone: p = 0.0039, but nine pairs that differ are under the minimum of ten.
    row = best(lift("reorder", 9, 0, 0.15, 0.45))
    assert (row["verdict"], row["p_holm"] < 0.05) == ("not significant", True)
    assert best_pipeline_section([row])[-2].endswith("| not significant: fewer than 10 pairs differ |")


def test_a_smaller_lift_that_holds_is_named_and_recommended_when_the_highest_does_not() -> None:
    row = best(lift("reorder", 6, 0, 0.05, 0.4), lift("fact", 14, 9, -0.1, 0.3), lift("recite", 15, 1, 0.2, 0.6))
    assert (row["strategy"], row["verdict"]) == ("recite", "significant")
    weak = best(lift("reorder", 7, 0, 0.02, 0.4), lift("fact", 13, 1, 0.05, 0.6, n=60))
    assert (weak["strategy"], weak["verdict"], weak["above_zero"], weak["recommend"]) == (
        "reorder",
        "not significant",
        ["fact"],
        "fact",
    )
    line = best_pipeline_section([weak])[-2]
    assert line.startswith("| litm-qa | standard | `fact` | `reorder` |")
    assert line.endswith("| not significant; significant with a smaller lift: `fact` |")


def test_equal_lifts_go_to_the_higher_lower_bound_and_name_the_tie() -> None:
    row = best(lift("reorder", 12, 0, 0.1, 0.6), lift("recite", 12, 0, 0.2, 0.6), lift("fact", 3, 0, 0.0, 0.3))
    assert (row["strategy"], row["tied_with"], row["verdict"]) == ("recite", ["reorder"], "significant")
    same = best(lift("fact", 12, 0, 0.2, 0.6), lift("recite", 12, 0, 0.2, 0.6))
    assert (same["strategy"], same["tied_with"]) == ("recite", ["fact"])  # then the run's order
    assert "| `recite`, tied with `fact` |" in best_pipeline_section([same])[-2]


def test_when_no_strategy_lifts_none_is_the_best_pipeline() -> None:
    row = best(lift("reorder", 2, 3, -0.12, 0.02), lift("recite", 0, 12, -0.6, -0.2), lift("fact", 1, 13, -0.6, -0.2))
    assert (row["strategy"], row["verdict"], row["below_zero"]) == ("reorder", "no lift", ["recite", "fact"])
    assert best_pipeline_section([row])[-2].startswith(
        "| litm-qa | standard | `none` | `none` (highest: `reorder`) | -0.033 | [-0.120, +0.020] | 2/3 | 1 /3 | 30 |"
    )
    assert best_pipeline_section([row])[-2].endswith(
        "| no strategy lifts; `recite`, `fact` significantly below `none` |"
    )
    flat = best(lift("reorder", 0, 0, 0.0, 0.0), lift("recite", 0, 0, 0.0, 0.0))
    assert (flat["strategy"], flat["verdict"], flat["tied_with"]) == ("reorder", "no lift", ["recite"])
    assert best_pipeline_section([flat])[-2].endswith(
        "| cannot rank on this model: every strategy scored as `none` did |"
    )


def test_the_verdict_leads_with_cost_and_puts_unrankable_regimes_last() -> None:
    rankable = best(lift("reorder", 12, 0, 0.2, 0.55))
    flat = {**best(lift("reorder", 0, 0, 0.0, 0.0, variant="aaa")), "task": "litm-kv"}
    cost = [{"task": "litm-qa", "strategy": "reorder", "calls_vs_none": 1.0, "p50_s_vs_none": 1.25}]
    table = best_pipeline_section([flat, rankable], cost)
    assert table[0] == "## Verdict"
    assert table[-3].startswith("| litm-qa | standard | `reorder` | `reorder` | +0.400 | [+0.200, +0.550] | 12/0 |")
    assert "| 1.00 | 1.25 | significant" in table[-3]
    assert table[-2].startswith("| litm-kv | aaa | `none` |")


def test_a_smoke_test_states_its_verdict_but_recommends_nothing() -> None:
    row = best(lift("reorder", 12, 0, 0.2, 0.55))
    table = best_pipeline_section([row], profile="quick")
    assert any(line.startswith("**Smoke test**") for line in table)
    assert table[-2].startswith("| litm-qa | standard | `none` | `reorder` |")


def test_one_row_per_task_and_variant_from_the_lifts_over_all_sizes() -> None:
    rows = best_pipelines(
        [
            *family(lift("reorder", 12, 0, 0.2, 0.55)),
            {**lift("recite", 27, 0, 0.8, 1.0), "size": 20},  # one size only: not the regime's lift
            *family(lift("recite", 5, 2, -0.1, 0.3, variant="hard")),
        ],
        ORDER,
    )
    assert [(r["variant"], r["strategy"]) for r in rows] == [("hard", "recite"), ("standard", "reorder")]
    section = best_pipeline_section(rows)
    assert section[0] == "## Verdict"
    assert [line.split(" | ")[1] for line in section if line.startswith("| litm-qa")] == ["standard", "hard"]


def sample(strategy: str, variant: str, index: int, score: float, *, latency_s: float = 1.0, calls: int = 1) -> Sample:
    """One litm-qa answer at 10 documents, the gold at index 4."""
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
            "latency_s": latency_s,
            "prompt_tokens": 100,
            "completion_tokens": 5,
            "upstream_calls": calls,
            "applied": strategy,
        }
    )


def test_results_json_and_report_name_the_best_pipeline_from_the_samples() -> None:
    # standard: none right on 1 of 15, reorder on 3 of 15 (the same case and 2 more): 2 wins, 0 losses, p = 0.5.
    # hard: reorder right on all 12 where none is right on none: 12 wins, p = 2/4096.
    samples = [sample("none", "standard", i, float(i < 1)) for i in range(15)]
    samples += [sample("reorder", "standard", i, float(i < 3)) for i in range(15)]
    samples += [sample("none", "hard", i, 0.0) for i in range(12)]
    samples += [sample("reorder", "hard", i, 1.0) for i in range(12)]
    info = RunInfo("m", "http://proxy/v1", ("none", "reorder"), 0, "full")
    data = results(samples, info)
    by_variant = {r["variant"]: r for r in data["best_pipeline"]}
    standard, hard = by_variant["standard"], by_variant["hard"]
    assert standard["value"] == pytest.approx(2 / 15)
    assert (standard["wins"], standard["losses"], standard["p_holm"]) == (2, 0, 0.5)
    assert (standard["strategy"], standard["verdict"], standard["n"]) == ("reorder", "not significant", 15)
    assert (hard["value"], hard["verdict"], hard["p_holm"]) == (1.0, "significant", 2 / 4096)
    # Newcombe's interval, not a bootstrap that collapses to [1, 1].
    assert hard["ci95"][0] == pytest.approx(0.6575, abs=1e-3)
    assert hard["ci95"][1] == 1.0
    markdown = render_markdown(data)
    # The verdict opens the report, before every task's section.
    assert markdown.index("## Verdict") < markdown.index("## litm-qa")
    assert "| litm-qa | standard | `none` | `reorder` | +0.133 | [" in markdown
    assert "| litm-qa | hard | `reorder` | `reorder` | +1.000 | [+0.65" in markdown

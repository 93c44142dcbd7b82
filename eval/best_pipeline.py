"""The verdict the report opens with: for each task and variant, the strategy with the highest paired lift over
`none` over all sizes, whether its bootstrap 95% interval excludes zero, what it costs, and whether the model
lets the regime rank anything at all. Computed from the lift and cost rows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

_TIE = 1e-9
"""Lifts closer than this are equal: the same mean, summed in another order, can differ in its last bits."""


def best_pipelines(lifts: Sequence[dict[str, Any]], order: Sequence[str]) -> list[dict[str, Any]]:
    """Per task x variant with any lift: the leading strategy, its lift, interval and n, and a verdict.

    The leader has the highest lift; among equal lifts, the higher interval's lower bound, then the run's order
    of strategies; the others with its lift are `tied_with`. `verdict` is `significant` (a lift above zero
    whose interval excludes zero), `not significant` (above zero, the interval takes in zero) or `no lift`
    (no strategy above zero: `none` is the best pipeline). `above_zero` and `below_zero` name every strategy
    whose interval lies wholly above or below zero, highest lift first."""
    regimes: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in lifts:
        if row["size"] is None:
            regimes[(row["task"], row["variant"])].append(row)
    rank = {strategy: i for i, strategy in enumerate(order)}
    best = []
    for (task, variant), rows in sorted(regimes.items()):
        ranked = sorted(rows, key=lambda r: (-r["value"], -r["ci95"][0], rank.get(r["strategy"], len(order))))
        leader = ranked[0]
        best.append(
            {
                "task": task,
                "variant": variant,
                "strategy": leader["strategy"],
                "value": leader["value"],
                "ci95": leader["ci95"],
                "n": leader["n"],
                "verdict": _verdict(leader),
                "tied_with": [r["strategy"] for r in ranked[1:] if leader["value"] - r["value"] < _TIE],
                "above_zero": [r["strategy"] for r in ranked if r["ci95"][0] > 0],
                "below_zero": [r["strategy"] for r in ranked if r["ci95"][1] < 0],
                "rankable": not all(_flat(r) for r in rows),
            }
        )
    return best


def _flat(row: dict[str, Any]) -> bool:
    """A lift of exactly zero on every pair: the strategy answered each case as `none` did (scores the same)."""
    return bool(abs(row["value"]) < _TIE and abs(row["ci95"][0]) < _TIE and abs(row["ci95"][1]) < _TIE)


def _verdict(leader: dict[str, Any]) -> str:
    if leader["value"] <= 0:
        return "no lift"
    return "significant" if leader["ci95"][0] > 0 else "not significant"


def best_pipeline_section(rows: list[dict[str, Any]], costs: Sequence[dict[str, Any]] = ()) -> list[str]:
    """The report's opening section, the verdict: per task and variant, the pipeline to switch on (the best
    whose interval excludes zero, else `none`), its lift and cost; regimes where every strategy scored exactly
    as `none` did cannot rank anything on this model and come last."""
    if not rows:
        return []
    cost = {(c["task"], c["strategy"]): c for c in costs}
    lines = [
        "## Verdict",
        "",
        "per task and variant, the strategy with the highest lift over `none` over all sizes (the `all` rows of "
        "each lift table; equal lifts go to the higher lower bound), and whether its bootstrap 95% interval "
        "excludes zero: `recommend` is what `contextlift policy` would write for it. The best of several "
        "strategies is picked after the fact, which favours a lucky one: an interval that only just excludes "
        "zero is weak evidence (no correction for multiple comparisons)",
        "",
        "| task | variant | recommend | best | lift | 95% CI | n | calls x | latency x | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    ordered = sorted(
        rows, key=lambda r: (not r.get("rankable", True), r["task"], r["variant"] != "standard", r["variant"])
    )
    for row in ordered:
        spent = cost.get((row["task"], row["strategy"]), {})
        recommend = f"`{row['strategy']}`" if row["verdict"] == "significant" else "`none`"
        verdict = (
            _verdict_cell(row)
            if row.get("rankable", True)
            else "cannot rank on this model: every strategy scored as `none` did"
        )
        lines.append(
            f"| {row['task']} | {row['variant']} | {recommend} | {_best_cell(row)} | {row['value']:+.3f} | "
            f"[{row['ci95'][0]:+.3f}, {row['ci95'][1]:+.3f}] | {row['n']} | {_times(spent.get('calls_vs_none'))} | "
            f"{_times(spent.get('p50_s_vs_none'))} | {verdict} |"
        )
    return [*lines, ""]


def _times(value: Any) -> str:
    return "-" if value is None else f"{float(value):.2f}"


def _best_cell(row: dict[str, Any]) -> str:
    if row["verdict"] == "no lift":
        return f"`none` (highest: `{row['strategy']}`{_ties(row)})"
    return f"`{row['strategy']}`{_ties(row)}"


def _ties(row: dict[str, Any]) -> str:
    return f", tied with {_names(row['tied_with'])}" if row["tied_with"] else ""


def _verdict_cell(row: dict[str, Any]) -> str:
    others = [s for s in row["above_zero"] if s != row["strategy"]]
    if row["verdict"] == "significant":
        return "significant: the interval excludes zero"
    if row["verdict"] == "not significant" and others:
        return f"not significant; significant with a smaller lift: {_names(others)}"
    below = row["below_zero"]
    if row["verdict"] == "no lift" and below:
        return f"no strategy lifts; {_names(below)} significantly below `none`"
    prefix = "no strategy lifts; " if row["verdict"] == "no lift" else ""
    return prefix + "no strategy's lift is distinguishable from zero"


def _names(strategies: Sequence[str]) -> str:
    return ", ".join(f"`{s}`" for s in strategies)

"""The verdict the report opens with: for each task and variant, the strategy with the highest paired lift over
`none` over all sizes, whether it holds under the one rule below, what it costs, and whether the model lets the
regime rank anything at all. Computed from the lift and cost rows.

The rule, shared with `contextlift policy` (eval.policy_writer): a lift is significant when it is above zero,
rests on at least MIN_DISCORDANT pairs that differ, its exact paired test stays below ALPHA after Holm's
correction over every pipeline compared in the same regime, and, where the run measured the upstream's noise floor
(the A/A row: the share of cases whose score changed when `none` was asked again) above zero, the lift's 95%
interval lies wholly above that floor; a loss is significant by the same rule below zero (its interval wholly
below minus the floor). A floor of zero, an upstream that answered every re-asked case as before, leaves the rule
the paired test alone.
A smoke-test run (the quick profile) states its verdicts but never recommends or yields a rule."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from contextlift.eval.verdicts.stats import ALPHA, MIN_DISCORDANT

SMOKE_PROFILES = ("quick",)
"""Profiles too small to act on (n of 1 to 3 per cell): their reports are labelled smoke tests, never rules."""

_TIE = 1e-9
"""Lifts closer than this are equal: the same mean, summed in another order, can differ in its last bits."""


def significant(row: dict[str, Any]) -> bool:
    """A lift row that holds: above zero, enough pairs that differ, Holm-corrected exact p below ALPHA."""
    return row["value"] > 0 and _holds(row)


def harmful(row: dict[str, Any]) -> bool:
    """A lift row significantly below zero, by the same rule."""
    return row["value"] < 0 and _holds(row)


def _holds(row: dict[str, Any]) -> bool:
    return _tested(row) and clear_of_floor(row)


def _tested(row: dict[str, Any]) -> bool:
    """The paired test alone: enough pairs that differ, Holm-corrected exact p below ALPHA."""
    p = row.get("p_holm", row.get("p"))
    return p is not None and row.get("wins", 0) + row.get("losses", 0) >= MIN_DISCORDANT and p < ALPHA


def clear_of_floor(row: dict[str, Any]) -> bool:
    """Whether the row's interval lies wholly beyond the regime's A/A floor, on the side of its lift: the largest
    lift that asking the same prompts again produced cannot explain it. True where no floor was measured or it is 0."""
    floor = row.get("floor") or 0.0
    low, high = row["ci95"]
    return floor <= 0 or (low > floor if row["value"] > 0 else high < -floor)


def best_pipelines(lifts: Sequence[dict[str, Any]], order: Sequence[str]) -> list[dict[str, Any]]:
    """Per task x variant with any lift: the leading strategy, its lift, interval and n, and a verdict.

    The leader has the highest lift; among equal lifts, the higher interval's lower bound, then the run's order
    of strategies; the others with its lift are `tied_with`. `verdict` is `significant` (the leader holds by
    `significant`), `not significant` (above zero, it does not hold) or `no lift` (no strategy above zero:
    `none` is the best pipeline). `above_zero` and `below_zero` name every strategy that holds above or below
    zero, highest lift first; `recommend` is the highest that holds above zero and none below (else None);
    `detectable` the smallest lift the regime's pairs could have detected."""
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
                "above_zero": [r["strategy"] for r in ranked if significant(r)],
                "below_zero": [r["strategy"] for r in ranked if harmful(r)],
                "recommend": next((r["strategy"] for r in ranked if significant(r)), None),
                "p": leader.get("p"),
                "p_holm": leader.get("p_holm"),
                "wins": leader.get("wins"),
                "losses": leader.get("losses"),
                "family": leader.get("family", len(rows)),
                "floor": leader.get("floor"),
                "inside_floor": leader["value"] > 0 and _tested(leader) and not clear_of_floor(leader),
                "detectable": min((r["detectable"] for r in rows if r.get("detectable") is not None), default=None),
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
    return "significant" if significant(leader) else "not significant"


def best_pipeline_section(
    rows: list[dict[str, Any]], costs: Sequence[dict[str, Any]] = (), profile: str = ""
) -> list[str]:
    """The report's opening section, the verdict: per task and variant, the pipeline to switch on (the best that
    holds by the rule, else `none`), its lift, test and cost, and the smallest lift the run could have found;
    regimes where every strategy scored exactly as `none` did cannot rank anything on this model and come last."""
    if not rows:
        return []
    cost = {(c["task"], c["strategy"]): c for c in costs}
    smoke = profile in SMOKE_PROFILES
    lines = ["## Verdict", ""]
    if smoke:
        lines += [
            f"**Smoke test** (profile `{profile}`): too few cases per cell to act on. The table shows that the "
            "pipeline runs end to end; `recommend` stays `none` and `contextlift policy` writes no rule from it. "
            "Run `--profile full` for a verdict: about 57,000 requests with every task and pipeline, so price it "
            "first with `--dry-run` and narrow it to what you would switch on (`--tasks litm-qa --strategies none "
            "--strategies 'reorder; order=promote'`).",
            "",
        ]
    lines += [
        "per task and variant, the strategy with the highest lift over `none` over all sizes (the `all` rows of "
        "each lift table; equal lifts go to the higher lower bound). A lift holds when it is above zero, at least "
        f"{MIN_DISCORDANT} pairs differ (wins + losses), and the exact paired test (McNemar's for right/wrong "
        f"answers) stays below p = {ALPHA} after Holm's correction over the pipelines compared in the regime "
        "(`p (Holm)`; the family size follows the slash), and, where the run measured a noise floor above 0 (the A/A "
        "table), its 95% interval lies wholly above that floor. `recommend` is the highest lift that holds: what "
        "`contextlift policy` would write. `detectable` is the smallest lift the run could have found with 80% "
        'power at its n and `none`\'s accuracy: with no verdict, read "no lift larger than that". `calls x` and '
        "`latency x` (the median's) are the recommended pipeline's cost relative to `none`: 1.00 where `recommend` "
        "is `none`",
        "",
        "| task | variant | recommend | best | lift | 95% CI | wins/losses | p (Holm) | n | detectable | "
        "calls x | latency x | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ordered = sorted(
        rows, key=lambda r: (not r.get("rankable", True), r["task"], r["variant"] != "standard", r["variant"])
    )
    for row in ordered:
        chosen = None if smoke else row.get("recommend")
        # The cost of what the row recommends: where that is `none`, the best strategy (or one tied with it) is not
        # switched on, and its calls and latency are not what a reader following the row would pay.
        spent = cost.get((row["task"], chosen or "none"), {})
        recommend = f"`{chosen}`" if chosen else "`none`"
        verdict = (
            _verdict_cell(row)
            if row.get("rankable", True)
            else "cannot rank on this model: every strategy scored as `none` did"
        )
        lines.append(
            f"| {row['task']} | {row['variant']} | {recommend} | {_best_cell(row)} | {row['value']:+.3f} | "
            f"[{row['ci95'][0]:+.3f}, {row['ci95'][1]:+.3f}] | {_counts(row)} | {_p_cell(row)} | {row['n']} | "
            f"{_detectable(row.get('detectable'))} | {_times(spent.get('calls_vs_none'))} | "
            f"{_times(spent.get('p50_s_vs_none'))} | {verdict} |"
        )
    return [*lines, ""]


def _counts(row: dict[str, Any]) -> str:
    return "-" if row.get("wins") is None else f"{row['wins']}/{row['losses']}"


def _p_cell(row: dict[str, Any]) -> str:
    p = row.get("p_holm")
    return "-" if p is None else f"{p:.2g} /{row.get('family', 1)}"


def _detectable(value: float | None) -> str:
    return "none" if value is None else f"{value:+.3f}"


def _times(value: Any) -> str:
    return "-" if value is None or math.isnan(float(value)) else f"{float(value):.2f}"


def _best_cell(row: dict[str, Any]) -> str:
    if row["verdict"] == "no lift":
        return f"`none` (highest: `{row['strategy']}`{_ties(row)})"
    return f"`{row['strategy']}`{_ties(row)}"


def _ties(row: dict[str, Any]) -> str:
    return f", tied with {_names(row['tied_with'])}" if row["tied_with"] else ""


def _verdict_cell(row: dict[str, Any]) -> str:
    others = [s for s in row["above_zero"] if s != row["strategy"]]
    if row["verdict"] == "significant":
        return "significant: holds after Holm's correction"
    if row.get("inside_floor"):
        return f"not significant: its interval reaches into the noise floor ({row['floor']:.3f})"
    if row["verdict"] == "not significant" and others:
        return f"not significant; significant with a smaller lift: {_names(others)}"
    if row["verdict"] == "not significant" and (row.get("wins") or 0) + (row.get("losses") or 0) < MIN_DISCORDANT:
        return f"not significant: fewer than {MIN_DISCORDANT} pairs differ"
    below = row["below_zero"]
    if row["verdict"] == "no lift" and below:
        return f"no strategy lifts; {_names(below)} significantly below `none`"
    prefix = "no strategy lifts; " if row["verdict"] == "no lift" else ""
    return prefix + "no strategy's lift is distinguishable from zero"


def _names(strategies: Sequence[str]) -> str:
    return ", ".join(f"`{s}`" for s in strategies)

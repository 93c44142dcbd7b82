"""`report.md`: the verdict first, then one section per task (accuracy by position in lm-evaluation-harness style,
effective length, lifts, gap recovered, cost), rendered from what `contextlift.eval.verdicts.results` computed."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from contextlift.eval.identity import UpstreamIdentity
from contextlift.eval.report.literal import code_span
from contextlift.eval.report.ranker_split import ranker_sections
from contextlift.eval.verdicts.best_pipeline import best_pipeline_section
from contextlift.eval.verdicts.effective_length import effective_length_table
from contextlift.eval.verdicts.results import order_of


def _strategies(names: Iterable[str], requested: Sequence[str]) -> list[str]:
    """The strategies present, in the run's order, then any others by name."""
    present = set(names)
    return [s for s in requested if s in present] + sorted(present - set(requested))


def render_markdown(data: dict[str, Any], plots: dict[str, list[str]] | None = None) -> str:
    """`report.md`: one section per task, tables in lm-evaluation-harness style (value +/- stderr)."""
    info = data["run"]
    strategies_order = list(info["strategies"])
    lines = [
        "# contextlift evaluation report",
        "",
        f"- model: {code_span(info['model'])} through {code_span(info['proxy'])}",
        f"- strategies: {', '.join(code_span(s) for s in info['strategies'])}",
        f"- profile `{info['profile']}`, seed {info['seed']}" + (f", run `{info['run']}`" if info.get("run") else ""),
        *_upstream_lines(info.get("upstreams") or {}),
        "- accuracy is `value ± stderr` (n per cell in `results.json`); lifts are paired against `none` on the "
        "same cases: wins and losses are the pairs where the strategy alone, or `none` alone, scored higher; "
        "`p` is the exact two-sided test on them (McNemar's for right/wrong answers, the sign test otherwise) and "
        "`p (Holm)` the same after Holm's correction over the strategies of the regime; the 95% interval is "
        "Newcombe's for right/wrong answers, a paired bootstrap otherwise",
        "",
    ]
    # The verdict first: what to switch on is what a reader opens the report for; the notes on data come after.
    lines += best_pipeline_section(data["best_pipeline"], data["cost"], str(info.get("profile", "")))
    lines += _noise_floor_section(data.get("noise_floor") or [], data.get("not_compared") or [])
    lines += [f"- {note}" for note in info["notes"]] + [""] if info["notes"] else []
    lines += ranker_sections(data)
    accuracy = data["accuracy"]
    for task in order_of(a["task"] for a in accuracy):
        meta = info["tasks"].get(task, {})
        lines += [f"## {task}: {meta.get('title', '')}".rstrip(": "), ""]
        if "prompt" in meta:
            lines += [f"prompt shape: `{meta['prompt']}`", ""]
        rows = [a for a in accuracy if a["task"] == task]
        for variant in sorted({a["variant"] for a in rows}, key=lambda v: (v != "standard", v)):
            for size in order_of(a["size"] for a in rows if a["variant"] == variant):
                cells = [a for a in rows if a["variant"] == variant and a["size"] == size]
                lines += _accuracy_table(cells, variant, size, meta, strategies_order)
        lines += effective_length_table(
            [r for r in data["effective_length"] if r["task"] == task], meta, strategies_order
        )
        lines += _lift_table([r for r in data["lift"] if r["task"] == task], meta, strategies_order)
        lines += _gap_table([r for r in data["gap_recovered"] if r["task"] == task], meta, strategies_order)
        lines += _cost_table([r for r in data["cost"] if r["task"] == task], strategies_order)
        for plot in (plots or {}).get(task, []):
            lines += [f"![{Path(plot).stem}]({plot})", ""]
    return "\n".join(lines).rstrip() + "\n"


def _accuracy_table(
    cells: list[dict[str, Any]], variant: str, size: int, meta: dict[str, str], order: Sequence[str]
) -> list[str]:
    positions = order_of(c["position"] for c in cells)
    label = meta.get("position_unit", "position")
    header = [f"{label} {p}" if p is not None else "all" for p in positions]
    lines = [
        f"### {variant}, {size} {meta.get('size_unit', '')}".rstrip(),
        "",
        "| strategy | " + " | ".join(header) + " | n |",
        "|---" * (len(header) + 2) + "|",
    ]
    for strategy in _strategies((c["strategy"] for c in cells), order):
        by_position = {c["position"]: c for c in cells if c["strategy"] == strategy}
        values = [_pm(by_position[p]) if p in by_position else "" for p in positions]
        n = sum(c["n"] for c in by_position.values())
        lines.append(f"| {strategy} | " + " | ".join(values) + f" | {n} |")
    return [*lines, ""]


def _lift_table(rows: list[dict[str, Any]], meta: dict[str, str], order: Sequence[str]) -> list[str]:
    if not rows:
        return []
    lines = [
        "### Lift over `none`",
        "",
        "| variant | strategy | "
        + meta.get("size_unit", "size")
        + " | lift | 95% CI | wins/losses | p | p (Holm) | n | runs |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(
        rows, key=lambda r: (r["variant"], _rank(r["strategy"], order), r["size"] is None, r["size"] or 0)
    ):
        size = "all" if row["size"] is None else row["size"]
        lines.append(
            f"| {row['variant']} | {row['strategy']} | {size} | {row['value']:+.3f} | "
            f"[{row['ci95'][0]:+.3f}, {row['ci95'][1]:+.3f}] | {row.get('wins', '-')}/{row.get('losses', '-')} | "
            f"{_p(row.get('p'))} | {_p(row.get('p_holm'))} | {row['n']} | {row.get('runs') or '-'} |"
        )
    return [*lines, ""]


def _upstream_lines(upstreams: dict[str, dict[str, Any]]) -> list[str]:
    if not upstreams:
        return ["- upstream: not recorded (a run from before upstreams were): its answers may come from more than "
                "one run of an upstream that did not reproduce them"]  # fmt: skip
    lines = []
    for fingerprint, identity in upstreams.items():
        lines.append(f"- upstream `{fingerprint}`: {UpstreamIdentity.from_json(identity).describe()}")
    if len(upstreams) > 1:
        lines.append("- more than one upstream answered: only answers from the same one are paired")
    return lines


def _noise_floor_section(floors: list[dict[str, Any]], not_compared: list[dict[str, Any]]) -> list[str]:
    """The A/A rows beside the verdict: how much asking the same prompts again moved the scores."""
    lines = ["## Noise floor (A/A)", ""]
    if not floors:
        lines += [
            "Not measured (`--reasked 0`, or a run from before it was): the verdict is the paired test alone.",
            "",
        ]
    else:
        lines += [
            "`none` asked again on a sample of the cases, after every other request of the run. The floor is the "
            "share of those cases whose score changed: a lift counts only where its 95% interval lies wholly "
            "beyond it (a floor of 0 leaves the paired test alone).",
            "",
            "| task | variant | re-asked | scores changed | answers changed | floor | A/A lift | 95% CI |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in floors:
            low, high = row["ci95"]
            lines.append(
                f"| {row['task']} | {row['variant']} | {row['n']} | {row['changed']} | {row['answers_changed']} | "
                f"{row['floor']:.3f} | {row['value']:+.3f} | [{low:+.3f}, {high:+.3f}] |"
            )
        lines.append("")
    for row in not_compared:
        lines.append(f"- `{row['strategy']}` ({row['task']}, {row['variant']}): {row['cases']} cases answered by "
                     "another upstream than `none`'s, left out of its lift")  # fmt: skip
    return [*lines, ""] if not_compared else lines


def _gap_table(rows: list[dict[str, Any]], meta: dict[str, str], order: Sequence[str]) -> list[str]:
    if not rows:
        return []
    lines = [
        "### Positional gap recovered",
        "",
        "(worst-position accuracy - `none`'s worst) / (`none`'s best - `none`'s worst); 1 closes the gap, "
        "0 leaves it, below 0 widens it",
        "",
        f"| variant | strategy | {meta.get('size_unit', 'size')} | gap recovered |",
        "|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: (r["variant"], _rank(r["strategy"], order), r["size"])):
        value = "n/a (no gap)" if row["value"] is None else f"{row['value']:+.2f}"
        lines.append(f"| {row['variant']} | {row['strategy']} | {row['size']} | {value} |")
    return [*lines, ""]


def _cost_table(rows: list[dict[str, Any]], order: Sequence[str]) -> list[str]:
    lines = [
        "### Cost",
        "",
        "mean per answer, over the cases the strategies ran (the baselines' own cases left out); p50/p95 are "
        "latencies as the client saw them, queueing included",
        "",
        "| strategy | upstream calls | tokens | p50 s | p95 s | calls vs none | tokens vs none | "
        "p50 vs none | p95 vs none | fell back | errors |",
        "|---" * 11 + "|",
    ]
    for row in sorted(rows, key=lambda r: _rank(r["strategy"], order)):
        lines.append(
            f"| {row['strategy']} | {_num(row['calls'], 2)} | {_num(row['tokens'], 0)} | "
            f"{_num(row['p50_s'], 2)} | {_num(row['p95_s'], 2)} | {_num(row['calls_vs_none'], 2)} | "
            f"{_num(row['tokens_vs_none'], 2)} | {_num(row['p50_s_vs_none'], 2)} | "
            f"{_num(row['p95_s_vs_none'], 2)} | {_num(row['fallback_share'], 2)} | {row['errors']} |"
        )
    return [*lines, ""]


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def _pm(cell: dict[str, Any]) -> str:
    return f"{cell['value']:.3f} ± {cell['stderr']:.3f}"


def _num(value: float, digits: int) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def _rank(strategy: str, order: Sequence[str]) -> tuple[int, str]:
    return (order.index(strategy) if strategy in order else len(order), strategy)

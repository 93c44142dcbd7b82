"""The report's sections on ranked pipelines: the lift split by whether the ranker was right, and whether a signal
the proxy has at request time tells the two apart (`contextlift.eval.verdicts.ranker_split` computes both)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from contextlift.eval.report.literal import code_span


def ranker_sections(data: dict[str, Any]) -> list[str]:
    """Both sections, or nothing for a run whose samples carry no rankings."""
    split, signal, lifts = data.get("ranker_split"), data.get("ranker_signal"), data.get("signal_lift")
    if not split and not signal:
        return []
    check = data.get("ranker_check") or {}
    return [
        *_split_section(split or [], check),
        *_signal_section(signal or []),
        *_signal_lift_section(lifts or []),
    ]


def _split_section(rows: Sequence[dict[str, Any]], check: dict[str, int]) -> list[str]:
    lines = [
        "## Lift by whether the ranker was right",
        "",
        "Each ranked pipeline's pairs, split by whether its ranker (the `ranker=` of its first ranking step, else the "
        "default) put a gold unit first on that case: the documents the proxy finds, or the paragraphs it reads "
        "where it may not move them. `p (Holm)` is corrected over the pipelines of the regime in the same half; the "
        "floor is the A/A floor of the re-asked cases that fall in the half (`-`: none did); `n to decide` is the "
        "pairs at which a lift of this size, with this share of pairs differing, would hold with 80% power."
        + (
            f" The unit the eval ranks first is the one the proxy named or quoted in {check['matched']} of "
            f"{check['compared']} answers that say which."
            if check.get("compared")
            else ""
        ),
        "",
        "| variant | pipeline | ranker | n | lift | 95% CI | wins/losses | p (Holm) | floor | n to decide |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        floor = "-" if row["floor"] is None else f"{row['floor']:.3f} ({row['reasked']})"
        lines.append(
            f"| {row['variant']} | {code_span(row['strategy'])} | {row['half']} | {row['n']} | {_lift(row)} | "
            f"{_ci(row['ci95'])} | {row['wins']}/{row['losses']} | {_p_holm(row)} | {floor} | "
            f"{_count(row['to_decide'])} |"
        )
    return [*lines, ""]


def _signal_section(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "## A signal at request time",
        "",
        "Whether what the proxy knows before it sends anything tells the questions where a ranker is right from "
        "those where it is wrong, each question once (its case with the gold first: its other positions are the same "
        "documents in another order, ranked alike). `margin`: the ranker's first unit's lead over its second, as a "
        "share of its lead over its last (`ranker_margin` in a policy); its AUC (0.5: no better than chance) with "
        "Hanley and McNeil's 95% interval (widened to Wilson's on the smaller side's count, where that is wider); a "
        "threshold chosen on the questions of even sample number (Youden's J), "
        "and on the odd ones the share right at or above it and below it. `agree`: lexical and minilm rank the same "
        "unit first; the share right where they agree and where they do not, on every question. `all` pools the "
        "variants: the proxy cannot tell them apart in a request.",
        "",
        "| variant | ranker | right | margin AUC | 95% CI | threshold | check: right above | check: right below "
        "| right if agree | right if not |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        check, agree = row["check"], row.get("agree")
        threshold = "-" if row["threshold"] is None else f"{row['threshold']:.3f}"
        agreed = ["-", "-"]
        if agree:
            agreed = [
                _share(agree["right_agree"], agree["n_agree"]),
                _share(agree["right_disagree"], agree["n_disagree"]),
            ]
        lines.append(
            f"| {row['variant']} | {row['ranker']} | {row['right']}/{row['n']} | {_number(row['auc'])} | "
            f"{_ci(row['auc_ci95'], signed=False)} | {threshold} | {_share(check['right_above'], check['n_above'])} | "
            f"{_share(check['right_below'], check['n_below'])} | {agreed[0]} | {agreed[1]} |"
        )
    return [*lines, ""]


def _signal_lift_section(rows: Sequence[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    lines = [
        "### Lift where the signal says go and where it says stay",
        "",
        "Per ranked pipeline, its lift over `none` where its ranker's margin is at or above the threshold chosen "
        "on the even half, and below it, on the odd half; and where lexical and minilm agree on the first unit, and "
        "where they do not, on every case. Exact test without a correction: these rows only say where to look.",
        "",
        "| variant | pipeline | where | n | lift | 95% CI | wins/losses | p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        where = row["part"]
        if where.startswith("margin") and row["threshold"] is not None:
            where += f" {row['threshold']:.3f}"
        lines.append(
            f"| {row['variant']} | {code_span(row['strategy'])} | {where} | {row['n']} | {_lift(row)} | "
            f"{_ci(row['ci95'])} | {row['wins']}/{row['losses']} | {_p(row['p'])} |"
        )
    return [*lines, ""]


def _lift(row: dict[str, Any]) -> str:
    return "-" if row["value"] is None else f"{row['value']:+.3f}"


def _ci(bounds: Sequence[float | None], *, signed: bool = True) -> str:
    low, high = bounds
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return "-"
    return f"[{low:+.3f}, {high:+.3f}]" if signed else f"[{low:.2f}, {high:.2f}]"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def _p_holm(row: dict[str, Any]) -> str:
    return "-" if row["p_holm"] is None else f"{row['p_holm']:.2g} /{row['family']}"


def _number(value: float | None) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.2f}"


def _share(right: int, n: int) -> str:
    return "-" if not n else f"{right}/{n}"


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"

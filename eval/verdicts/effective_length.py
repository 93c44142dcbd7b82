"""Effective length, in NoLiMa's manner: per strategy, the longest context length up to which it keeps 85% of
its own score at the shortest length. Computed from the report's accuracy cells, for the tasks whose sizes are
context lengths."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

CONTEXT_LENGTH_TASKS = ("length",)
"""Tasks whose sizes grow the context with nothing else changed (Du et al.'s distraction tokens)."""
RETAINED = 0.85
"""NoLiMa's threshold (Modarressi et al. 2025): a share of the model's own short-context score, so a weak model
is not declared ineffective everywhere. RULER (Hsieh et al. 2024) instead holds every model to one absolute
score, Llama-2-7B's at 4K (85.6%); this proxy's models are too varied in size for one bar."""
_ROUNDING = 1e-9


def effective_lengths(accuracy: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task x variant x strategy of `CONTEXT_LENGTH_TASKS`: the score at each length (pooled over
    positions), the base (the shortest length's score), and the effective length.

    `effective_length` is None when it cannot be told, and `note` says why: only one length was measured, the
    base score is 0 (every score keeps 85% of it), or the first length past the base already falls below.
    `first_below` is the shortest length under the threshold, None when every length keeps it (the effective
    length is then the longest measured, a lower bound)."""
    cells: dict[tuple[str, str, str], dict[int, list[tuple[float, int]]]] = defaultdict(lambda: defaultdict(list))
    for cell in accuracy:
        if cell["task"] in CONTEXT_LENGTH_TASKS and cell["n"]:
            cells[(cell["task"], cell["variant"], cell["strategy"])][cell["size"]].append((cell["value"], cell["n"]))
    rows = []
    for (task, variant, strategy), by_size in sorted(cells.items()):
        scores = [_pooled(size, by_size[size]) for size in sorted(by_size)]
        rows.append({"task": task, "variant": variant, "strategy": strategy, **_effective(scores)})
    return rows


def _pooled(size: int, cells: list[tuple[float, int]]) -> dict[str, Any]:
    n = sum(count for _, count in cells)
    return {"size": size, "value": sum(value * count for value, count in cells) / n, "n": n}


def _effective(scores: list[dict[str, Any]]) -> dict[str, Any]:
    base = scores[0]
    threshold = RETAINED * base["value"]
    found: dict[str, Any] = {
        "base_size": base["size"],
        "base_score": base["value"],
        "threshold": threshold,
        "scores": scores,
        "effective_length": None,
        "first_below": None,
        "note": None,
    }
    longer = scores[1:]
    if not longer:
        return {**found, "note": "one length only"}
    if base["value"] <= 0:
        return {**found, "note": "base score is 0"}
    # A score of exactly 85% of the base keeps it, whichever way the floats round (17/116 < 0.85 * (5/29)).
    below = next((s["size"] for s in longer if s["value"] < threshold - _ROUNDING), None)
    kept = [s["size"] for s in longer if below is None or s["size"] < below]
    if not kept:
        return {**found, "first_below": below, "note": f"below {RETAINED:.0%} already at {below}"}
    if below is None:
        return {**found, "effective_length": kept[-1], "note": "kept at every length measured"}
    return {**found, "effective_length": kept[-1], "first_below": below}


def effective_length_table(rows: list[dict[str, Any]], meta: dict[str, str], order: Sequence[str]) -> list[str]:
    """The report's table: NoLiMa's layout (effective length, base score with its threshold, each length)."""
    if not rows:
        return []
    unit = meta.get("size_unit", "size")
    sizes = sorted({s["size"] for row in rows for s in row["scores"]})
    lines = [
        "### Effective length",
        "",
        f"the longest context, in {unit}, up to which a strategy keeps at least {RETAINED:.0%} of its base score "
        "(its own score at the shortest length), every length in between included; scores pooled over "
        f"{meta.get('position_unit', 'positions')}. The threshold is relative, as in NoLiMa (Modarressi et al. "
        "2025, whose base is the score at 250 to 1K tokens), not RULER's absolute one (Hsieh et al. 2024: "
        f"Llama-2-7B's score at 4K). n/a: no length past the base keeps {RETAINED:.0%}, or the base score is 0 "
        f"(any score keeps {RETAINED:.0%} of 0). Point estimates; n per cell in `results.json`",
        "",
        f"| variant | strategy | effective length | base ({RETAINED:.0%}) | "
        + " | ".join(str(s) for s in sizes)
        + " |",
        "|---" * (len(sizes) + 4) + "|",
    ]
    rank = {strategy: i for i, strategy in enumerate(order)}
    for row in sorted(rows, key=lambda r: (r["variant"], rank.get(r["strategy"], len(order)), r["strategy"])):
        by_size = {s["size"]: f"{s['value']:.3f}" for s in row["scores"]}
        lines.append(
            f"| {row['variant']} | {row['strategy']} | {_effective_cell(row)} | "
            f"{row['base_score']:.3f} ({row['threshold']:.3f}) | "
            + " | ".join(by_size.get(s, "") for s in sizes)
            + " |"
        )
    return [*lines, ""]


def _effective_cell(row: dict[str, Any]) -> str:
    if row["effective_length"] is None:
        return f"n/a ({row['note']})"
    if row["note"]:
        return f"{row['effective_length']} ({row['note']})"
    return str(row["effective_length"])

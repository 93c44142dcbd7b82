"""The report's figures (PNG, matplotlib without a display): accuracy against gold position, one line per
strategy with each point's 95% interval (Wilson's for right/wrong answers) as an error bar and the closed-book
and oracle baselines dashed (Lost in the Middle's Figure 1), and a depth x context-size heatmap per strategy
where a task varies both."""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BASELINE_VARIANTS = ("closed-book", "oracle")
DODGE = 0.012
"""Each strategy's points are shifted sideways by this share of the position axis, so error bars at the same
position stay apart."""
TITLE_WIDTH = 40
"""Characters per line of a heatmap's strategy title: at 9 points, 40 fit over the axes of a 4-inch column."""


def draw(data: dict[str, Any], folder: Path) -> dict[str, list[str]]:
    """Every figure the results allow, written under `folder`; per task, the paths relative to its parent."""
    import matplotlib

    matplotlib.use("Agg")
    folder.mkdir(parents=True, exist_ok=True)
    order = list(data["run"]["strategies"])
    tasks = data["run"]["tasks"]
    drawn: dict[str, list[str]] = {}
    accuracy = [a for a in data["accuracy"] if a["value"] is not None and not math.isnan(a["value"])]
    for task in sorted({a["task"] for a in accuracy}):
        rows = [a for a in accuracy if a["task"] == task]
        meta = tasks.get(task, {})
        for variant in sorted({a["variant"] for a in rows if not _is_baseline(a["variant"])}):
            cells = [a for a in rows if a["variant"] == variant]
            sizes = sorted({a["size"] for a in cells})
            positions = sorted({a["position"] for a in cells if a["position"] is not None})
            if len(positions) >= 2:
                for size in sizes:
                    baselines = _baselines_of(variant, [a for a in rows if a["size"] == size])
                    path = folder / f"{_slug(task, variant, str(size))}-position.png"
                    position_plot(
                        [a for a in cells if a["size"] == size],
                        baselines,
                        order,
                        meta,
                        path,
                        f"{task} · {variant} · {size} {meta.get('size_unit', '')}",
                    )
                    drawn.setdefault(task, []).append(f"{folder.name}/{path.name}")
            if len(positions) >= 2 and len(sizes) >= 2:
                path = folder / f"{_slug(task, variant)}-heatmap.png"
                _heatmaps(cells, order, meta, path, f"{task} · {variant}")
                drawn.setdefault(task, []).append(f"{folder.name}/{path.name}")
    return drawn


def position_plot(
    cells: Sequence[dict[str, Any]],
    baselines: Sequence[dict[str, Any]],
    order: Sequence[str],
    meta: dict[str, str],
    path: Path,
    title: str,
) -> None:
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    strategies = _strategies(cells, order)
    all_positions = [a["position"] for a in cells if a["position"] is not None]
    span = (max(all_positions) - min(all_positions)) if all_positions else 0
    for i, strategy in enumerate(strategies):
        points = sorted(
            (a["position"], a["value"], *_interval(a))
            for a in cells
            if a["strategy"] == strategy and a["position"] is not None
        )
        if points:
            shift = (i - (len(strategies) - 1) / 2) * DODGE * span
            axes.errorbar(
                [p + shift for p, *_ in points],
                [v for _, v, _, _ in points],
                yerr=[[v - low for _, v, low, _ in points], [high - v for _, v, _, high in points]],
                marker="o",
                capsize=2,
                elinewidth=0.8,
                label=strategy,
            )
    for variant, colour in zip(BASELINE_VARIANTS, ("grey", "black"), strict=True):
        values = [a["value"] for a in baselines if a["variant"] == variant]
        if values:
            axes.axhline(sum(values) / len(values), linestyle="--", color=colour, label=variant)
    axes.set_xticks(sorted({a["position"] for a in cells if a["position"] is not None}))
    axes.set_xlabel(meta.get("position_unit", "position"))
    axes.set_ylabel("accuracy (bars: 95% interval)")
    axes.set_ylim(-0.02, 1.02)
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7, loc="best")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _interval(cell: dict[str, Any]) -> tuple[float, float]:
    """The cell's 95% interval, clipped to hold its value (a cell written without one gets a zero-length bar)."""
    value = float(cell["value"])
    low, high = cell.get("ci95") or (value, value)
    low = value if low is None or math.isnan(low) else min(low, value)
    high = value if high is None or math.isnan(high) else max(high, value)
    return low, high


def _heatmaps(
    cells: Sequence[dict[str, Any]], order: Sequence[str], meta: dict[str, str], path: Path, title: str
) -> None:
    import matplotlib.pyplot as plt

    figure = heatmap_figure(cells, order, meta, title)
    figure.savefig(path)
    plt.close(figure)


def heatmap_figure(cells: Sequence[dict[str, Any]], order: Sequence[str], meta: dict[str, str], title: str) -> Figure:
    """One position x size heatmap per strategy, three to a row, sharing one colour bar.

    The layout is constrained: matplotlib places every title, axis label and tick label so that none of them
    overlaps another (a fixed grid put each row's x label over the titles of the row below)."""
    import matplotlib.pyplot as plt
    import numpy as np

    strategies = _strategies(cells, order)
    sizes = sorted({a["size"] for a in cells})
    positions = sorted({a["position"] for a in cells if a["position"] is not None})
    columns = min(3, len(strategies))
    rows = math.ceil(len(strategies) / columns)
    figure, grid = plt.subplots(
        rows, columns, figsize=(4 * columns, 3.2 * rows), dpi=100, squeeze=False, layout="constrained"
    )
    for axes, strategy in zip(grid.flat, strategies, strict=False):
        values = np.full((len(positions), len(sizes)), np.nan)
        for a in cells:
            if a["strategy"] == strategy and a["position"] is not None:
                values[positions.index(a["position"]), sizes.index(a["size"])] = a["value"]
        image = axes.imshow(values, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto", origin="upper")
        axes.set_xticks(range(len(sizes)), [str(s) for s in sizes], fontsize=7)
        axes.set_yticks(range(len(positions)), [str(p) for p in positions], fontsize=7)
        axes.set_xlabel(meta.get("size_unit", "size"), fontsize=8)
        axes.set_ylabel(meta.get("position_unit", "position"), fontsize=8)
        # A strategy header can be long ('reorder, medoid; k=5'): wrapped, it stays within its own column.
        axes.set_title("\n".join(textwrap.wrap(strategy, TITLE_WIDTH, break_on_hyphens=False)), fontsize=9)
        for (i, j), value in np.ndenumerate(values):
            if not np.isnan(value):
                axes.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
    for axes in list(grid.flat)[len(strategies) :]:
        axes.axis("off")
    figure.colorbar(image, ax=grid.ravel().tolist(), shrink=0.8, label="accuracy")
    figure.suptitle(title, fontsize=10)
    return figure


def _strategies(cells: Sequence[dict[str, Any]], order: Sequence[str]) -> list[str]:
    present = {a["strategy"] for a in cells}
    return [s for s in order if s in present] + sorted(present - set(order))


def _is_baseline(variant: str) -> bool:
    return any(variant == b or variant.endswith(f" {b}") for b in BASELINE_VARIANTS)


def _baselines_of(variant: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The baseline cells that belong to `variant`, named as the plain baselines: its own (`hard-squad
    closed-book`) where the task ran them, else the shared ones (`closed-book`)."""
    found = []
    for baseline in BASELINE_VARIANTS:
        own = [a for a in rows if a["variant"] == f"{variant} {baseline}"]
        found += [{**a, "variant": baseline} for a in own or [a for a in rows if a["variant"] == baseline]]
    return found


def _slug(*parts: str) -> str:
    return "-".join(re.sub(r"[^a-z0-9]+", "_", p.lower()).strip("_") for p in parts)

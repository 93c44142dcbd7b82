"""The heatmap figure's text, measured where the renderer puts it: no title, axis label or tick label covers
another (each row's x label once sat on the titles of the row below)."""

from __future__ import annotations

import itertools
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import pytest
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from contextlift.eval.report.plots import heatmap_figure

matplotlib.use("Agg")

META = {"size_unit": "distraction tokens", "position_unit": "evidence depth %"}


def cells(strategies: list[str], sizes: list[int], positions: list[int]) -> list[dict[str, Any]]:
    return [
        {"strategy": s, "size": size, "position": p, "value": (i + j) / 10}
        for i, s in enumerate(strategies)
        for j, (size, p) in enumerate(itertools.product(sizes, positions))
    ]


def labelled_texts(figure: Figure) -> list[tuple[str, Text]]:
    texts: list[tuple[str, Text]] = [(f"figure text {t.get_text()}", t) for t in figure.texts]
    for index, axes in enumerate(figure.axes):
        if not axes.axison:
            continue
        texts += [
            (f"axes {index} title", axes.title),
            (f"axes {index} x label", axes.xaxis.label),
            (f"axes {index} y label", axes.yaxis.label),
        ]
        texts += [(f"axes {index} tick {t.get_text()}", t) for t in axes.get_xticklabels() + axes.get_yticklabels()]
    return [(name, text) for name, text in texts if text.get_visible() and text.get_text()]


def overlaps(figure: Figure) -> list[str]:
    figure.canvas.draw()  # lays the figure out; each extent below is measured with the renderer of this draw
    boxes: list[tuple[str, Bbox]] = [(name, text.get_window_extent()) for name, text in labelled_texts(figure)]
    assert len(boxes) > 10
    return [f"{a} / {b}" for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlaps(box_b)]


@pytest.mark.parametrize(
    "strategies",
    [
        ["none", "reorder", "query-aware", "recite", "fact", "medoid; k=5"],
        ["none", "reorder"],
        [
            "none",
            "reorder, medoid; k=5; threshold=0.25",
            "query-aware; prompt=instruction-first",
            "recite",
            "a-strategy-header-with-no-space-to-break-it-at-all",
        ],
    ],
    ids=["two full rows", "one row", "long strategy headers"],
)
def test_no_title_or_axis_label_overlaps_another(strategies: list[str]) -> None:
    figure = heatmap_figure(cells(strategies, [0, 1000, 2000, 4000, 6000], [0, 50, 100]), strategies, META, "length")
    try:
        assert overlaps(figure) == []
    finally:
        plt.close(figure)

"""Writes a run's report folder: `samples.jsonl`, `results.json`, `report.md`, `plots/*.png`, `report.html`,
and `run.json` (what a later merge of shards needs to know about the run)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from contextlift.eval.cases import Sample
from contextlift.eval.report.html import render_html
from contextlift.eval.report.markdown import render_markdown
from contextlift.eval.report.plots import draw
from contextlift.eval.report.replay import stability_section
from contextlift.eval.verdicts.results import RunInfo, results

SAMPLES = "samples.jsonl"
RUN = "run.json"


def write_samples(folder: Path, samples: Sequence[Sample], info: RunInfo) -> None:
    """The shard's part: its samples and the run's description, enough for `merge` to rebuild the report."""
    folder.mkdir(parents=True, exist_ok=True)
    ordered = sorted(samples, key=_sample_order)
    (folder / RUN).write_text(json.dumps(asdict(info), indent=2) + "\n", encoding="utf-8")
    # Written whole, then renamed: a merge step waiting for the parts never reads half a file.
    partial = folder / f".{SAMPLES}.partial"
    partial.write_text("".join(json.dumps(s.to_json(), ensure_ascii=False) + "\n" for s in ordered), encoding="utf-8")
    partial.replace(folder / SAMPLES)


def write_report(folder: Path, samples: Sequence[Sample], info: RunInfo) -> dict[str, Any]:
    """Every report file for `samples`; returns the results."""
    # In the order samples.jsonl holds them: the report a run writes is then the one its samples give when re-read
    # (rows follow the samples' order).
    samples = sorted(samples, key=_sample_order)
    write_samples(folder, samples, info)
    data: dict[str, Any] = finite(results(samples, info))
    (folder / "results.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    plots = draw(data, folder / "plots")
    markdown = render_markdown(data, plots) + "\n".join(stability_section(samples))
    (folder / "report.md").write_text(markdown, encoding="utf-8")
    images = {src: folder / src for sources in plots.values() for src in sources}
    (folder / "report.html").write_text(render_html(markdown, images=images), encoding="utf-8")
    return data


def _sample_order(sample: Sample) -> tuple[str, str]:
    return (sample.case, sample.strategy)


def read_info(folder: Path) -> RunInfo:
    raw = json.loads((folder / RUN).read_text(encoding="utf-8"))
    return RunInfo(
        raw["model"],
        raw["proxy"],
        tuple(raw["strategies"]),
        raw["seed"],
        raw["profile"],
        tuple(raw["notes"]),
        raw["tasks"],
        raw.get("upstreams") or {},
        raw.get("run"),
    )


def finite(value: Any) -> Any:
    """NaN (no data for a cell) as null, so that results.json and probes.json are strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value

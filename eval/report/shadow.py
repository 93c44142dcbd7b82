"""`contextlift shadow-report SINK [SINK ...] --out DIR`: what shadow evaluation found on live traffic, as
`report.md` and `report.html`. The share of position-sensitive requests (the served answer changed when the
documents were reordered), each candidate's agreement with the served answer and its cost relative to it, all
with 95% intervals, overall and per day; with positional probes on (`shadow_probes`), accuracy by position and
each pipeline's lift per model and format (contextlift.eval.report.probes), also written as `probes.json` for
`contextlift policy`.

Many replicas write many sinks: each SINK is a file (its rotated files are read too) or a folder, whose `*.jsonl`
files are each read as a sink (a shared volume the replicas of a Deployment write to, one file each)."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contextlift.eval.report.html import image_sources, render_html
from contextlift.eval.report.literal import code_span, shown_date
from contextlift.eval.report.probes import PROBES_FILE, probe_groups, probe_section
from contextlift.eval.report.publish import finite
from contextlift.eval.sinks import Source, read_sinks, source_name
from contextlift.eval.verdicts.stats import BOOTSTRAP_RESAMPLES, Estimate, estimate

BOOTSTRAP_BLOCK = 1_000_000
"""Resampled values drawn at once (8 MB of indexes): what the bootstrap holds, however many records there are."""


def ratio_estimate(values: Sequence[float], seed: int = 0) -> Estimate:
    """Mean of positive ratios with a percentile-bootstrap 95% interval (ratios are not bounded by 1)."""
    data = np.asarray([v for v in values if math.isfinite(v)], dtype=float)
    n = len(data)
    if n == 0:
        return Estimate(math.nan, 0, math.nan, math.nan, math.nan)
    # The resamples drawn a block at a time (the same draws, in the same order, as one (resamples, n) array): whole,
    # they were 2,000 x n indexes and values at once, 600 MB for a sink of 18,600 records.
    rng, block = np.random.default_rng(seed), max(1, BOOTSTRAP_BLOCK // n)
    means = np.concatenate(
        [
            data[rng.integers(0, n, size=(min(block, BOOTSTRAP_RESAMPLES - start), n))].mean(axis=1)
            for start in range(0, BOOTSTRAP_RESAMPLES, block)
        ]
    )
    stderr = float(np.std(data, ddof=1)) / math.sqrt(n) if n > 1 else 0.0
    low, high = float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
    return Estimate(float(data.mean()), n, stderr, low, high)


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The report's numbers: position sensitivity, and per candidate agreement and cost ratios."""
    sensitive = [float(r["position_sensitive"]) for r in records if r.get("position_sensitive") is not None]
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        for row in record["candidates"]:
            values = rows[str(row["strategy"])]
            if row.get("error"):
                values["errors"].append(1.0)
                continue
            values["errors"].append(0.0)
            values["agrees"].append(float(bool(row["agrees"])))
            values["exact"].append(float(bool(row["exact"])))
            if record.get("position_sensitive"):
                values["agrees_when_sensitive"].append(float(bool(row["agrees"])))
            for key, served in (("calls", "calls"), ("tokens", "tokens"), ("seconds", "seconds")):
                if record.get(served):
                    values[f"{key}_ratio"].append(float(row[key]) / float(record[served]))
    return {
        "requests": len(records),
        "position_sensitive": estimate(sensitive),
        "candidates": {
            name: {
                "agrees": estimate(v["agrees"]),
                "exact": estimate(v["exact"]),
                "agrees_when_sensitive": estimate(v["agrees_when_sensitive"]),
                "errors": estimate(v["errors"]),
                "calls_ratio": ratio_estimate(v["calls_ratio"]),
                "tokens_ratio": ratio_estimate(v["tokens_ratio"]),
                "seconds_ratio": ratio_estimate(v["seconds_ratio"]),
            }
            for name, v in rows.items()
        },
    }


def sample_counts(tallies: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """What became of every sample the proxies drew, from their tallies (each run's latest, added up): sampled,
    evaluated, still pending, and the rest by reason with why. None for sinks written before tallies were."""
    if not tallies:
        return None
    from contextlift.proxy.shadow.tally import (
        DROPPED,
        why,
    )  # the proxy's own reasons, imported here as contextlift.eval.sinks does

    outcomes: Counter[str] = Counter()
    for tally in tallies:
        outcomes.update(tally["outcomes"])
    sampled = sum(int(t["sampled"]) for t in tallies)
    planned = max(int(t.get("planned_calls", 0)) for t in tallies)
    limits = max(tallies, key=lambda t: str(t.get("time", "")))["limits"]
    order = [*DROPPED, *sorted(set(outcomes) - {*DROPPED, "evaluated"})]
    lost = {o: {"count": outcomes[o], "why": why(o, limits, planned)} for o in order if outcomes[o]}
    return {
        "sampled": sampled,
        "evaluated": outcomes["evaluated"],
        "pending": max(0, sampled - outcomes.total()),
        "lost": lost,
        "planned_calls": planned,
        "limits": limits,
    }


def _sample_lines(counts: dict[str, Any] | None, records: int) -> list[str]:
    if counts is None:
        return [f"{records} evaluated samples; how many were drawn and dropped is not in these sinks (written by "
                "a proxy older than its tallies).", ""]  # fmt: skip
    lost = sum(v["count"] for v in counts["lost"].values())
    lines = [
        f"**{counts['sampled']} sampled, {counts['evaluated']} evaluated, {lost} not evaluated"
        + (f", {counts['pending']} still pending" if counts["pending"] else "")
        + f"**; {records} records in the sinks.",
    ]
    if counts["lost"]:
        lines += ["", "| not evaluated | samples | why |", "|---|---|---|"]
        lines += [f"| {outcome} | {v['count']} | {v['why']} |" for outcome, v in counts["lost"].items()]
    return [*lines, ""]


def _margin_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """The served rankings' margins (the top score's lead over the second, as a share of its lead over the last):
    their spread, and the position-sensitive share on either side of their median. Nothing where no served pipeline
    ranked."""
    ranked = [
        (float(r["served_margin"]), r.get("position_sensitive"))
        for r in records
        if isinstance(r.get("served_margin"), (int, float)) and math.isfinite(float(r["served_margin"]))
    ]
    if not ranked:
        return []
    margins = sorted(m for m, _ in ranked)
    low, median, high = (float(np.percentile(margins, q)) for q in (25, 50, 75))
    lines = [
        "",
        "## Served rankings",
        "",
        f"{len(ranked)} served requests ranked their documents; the first ranking's margin (its first document's "
        f"lead over its second, as a share of its lead over its last; `ranker_margin` in a policy): median "
        f"{median:.3f}, quartiles {low:.3f} to {high:.3f}. A small margin is a ranking the ranker was not sure of.",
        "",
        "| margin | requests | position-sensitive | 95% CI |",
        "|---|---|---|---|",
    ]
    for label, part in ((f"below {median:.3f}", [s for m, s in ranked if m < median]),
                        (f"{median:.3f} or more", [s for m, s in ranked if m >= median])):  # fmt: skip
        share = estimate([float(s) for s in part if s is not None])
        lines.append(f"| {label} | {len(part)} | {_share(share)} | {_interval(share)} |")
    return lines


def render_markdown(
    records: Sequence[dict[str, Any]],
    source: str,
    skipped: int = 0,
    probes: Sequence[str] = (),
    tallies: Sequence[dict[str, Any]] = (),
) -> str:
    """The report's text; `probes` is the positional-probe section's lines (eval.report.probes), `tallies` the
    sinks' (contextlift.eval.sinks.SinkRead.tallies): what became of every sample, which the report leads with."""
    summary = summarise(records)
    times = sorted(str(r.get("time", "")) for r in records)
    span = f"{times[0]} to {times[-1]}" if times else "no records"
    lines = [
        "# Shadow evaluation",
        "",
        *_sample_lines(sample_counts(tallies), len(records)),
        f"{summary['requests']} evaluated requests from {source}, {span}"
        + (f"; {skipped} malformed lines skipped" if skipped else "")
        + ". Without ground truth: an answer *agrees* when it equals the served one after normalisation or its "
        "embedding is within cosine 0.75 of it.",
        "",
        "## Position sensitivity",
        "",
        "The served configuration, asked again with the documents reversed and in one random order: a request "
        "whose answer changed depends on where its documents sit.",
        "",
        "| | share | 95% CI | n |",
        "|---|---|---|---|",
        f"| position-sensitive | {_share(summary['position_sensitive'])} | {_interval(summary['position_sensitive'])}"
        f" | {summary['position_sensitive'].n} |",
        "",
        "## Candidates",
        "",
        "| candidate | agrees | 95% CI | exact | agrees when sensitive | errors | calls x | tokens x | latency x "
        "(95% CI) | n |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in summary["candidates"].items():
        lines.append(
            f"| {code_span(name)} | {_share(c['agrees'])} | {_interval(c['agrees'])} | {_share(c['exact'])} | "
            f"{_share(c['agrees_when_sensitive'])} | {_share(c['errors'])} | {_ratio(c['calls_ratio'])} | "
            f"{_ratio(c['tokens_ratio'])} | {_ratio(c['seconds_ratio'])} {_interval(c['seconds_ratio'], ratio=True)} "
            f"| {c['agrees'].n} |"
        )
    lines += _margin_lines(records)
    lines += [*([""] if probes else []), *probes]
    lines += ["", "## Per day", "", "| day | requests | position-sensitive | 95% CI |", "|---|---|---|---|"]
    for day, group in _by_day(records):
        share = summarise(group)["position_sensitive"]
        lines.append(f"| {day} | {len(group)} | {_share(share)} | {_interval(share)} |")
    return "\n".join(lines) + "\n"


def write_shadow_report(sinks: Sequence[Source], out: Path, prefix: str | None = None) -> dict[str, Any]:
    """Write `report.md`, `report.html` and (with probes) `probes.json` for the records of `sinks` (files, folders,
    stores' URLs: `contextlift.eval.sinks.read_sinks`) into `out`; returns the summary, with the probe groups under
    `probes`.

    Raises:
        ValueError: the sinks hold no record and no tally.
    """
    # The report reads no captured request: memory per record stays small.
    read = read_sinks(sinks, whole=False, prefix=prefix)
    names = ", ".join(f"`{source_name(s)}`" for s in sinks)
    if not read.records and not read.tallies:
        raise ValueError(f"no shadow records in {names} (or rotated files); {read.skipped} malformed lines skipped")
    out.mkdir(parents=True, exist_ok=True)
    groups = probe_groups(read.records)
    probes = probe_section(groups, out)
    markdown = render_markdown(read.records, names, read.skipped, probes, read.tallies)
    (out / "report.md").write_text(markdown, encoding="utf-8")
    images = {src: out / src for src in image_sources(probes)}  # the plots drawn above, and nothing a sink names
    (out / "report.html").write_text(render_html(markdown, images=images), encoding="utf-8")
    if groups:
        named = [str(s) if isinstance(s, Path) else source_name(s) for s in sinks]  # a store without its password
        written = {"kind": "contextlift-shadow-probes", "version": 1, "sinks": named, "groups": groups}
        (out / PROBES_FILE).write_text(json.dumps(finite(written), indent=1, allow_nan=False) + "\n")
    return {
        **summarise(read.records),
        "skipped": read.skipped,
        "probes": groups,
        "samples": sample_counts(read.tallies),
    }


def _by_day(records: Iterable[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    days: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        days[shown_date(str(record.get("time", ""))) or "unknown"].append(record)  # a sink's time: only a date is shown
    return sorted(days.items())


def _share(e: Estimate) -> str:
    return "-" if e.n == 0 else f"{e.value:.3f}"


def _ratio(e: Estimate) -> str:
    return "-" if e.n == 0 else f"{e.value:.2f}"


def _interval(e: Estimate, *, ratio: bool = False) -> str:
    if e.n == 0:
        return "-"
    return f"[{e.low:.2f}, {e.high:.2f}]" if ratio else f"[{e.low:.3f}, {e.high:.3f}]"

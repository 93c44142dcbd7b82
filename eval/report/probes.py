"""The positional-probe part of `contextlift shadow-report`: per model and detected format, accuracy by the
needle's position for `none`, the served pipeline and each candidate (Wilson 95% intervals), the depth of the U
(the edges' mean against the middle, paired per probe), and each pipeline's paired lift over `none` under the
eval's own rule (eval.verdicts.best_pipeline.significant: exact paired test, at least MIN_DISCORDANT pairs that differ,
Holm's correction over the pipelines compared). Written as a report section, a position plot per group and
`probes.json`, which `contextlift policy` reads."""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from contextlift.eval.report.literal import code_span, shown_date
from contextlift.eval.verdicts.best_pipeline import harmful, significant
from contextlift.eval.verdicts.stats import ALPHA, MIN_DISCORDANT, detectable_lift, estimate, holm, paired_lift, wilson
from contextlift.strategies.probes import FINDABLE_KINDS

POSITIONS = {"first": 0, "middle": 50, "last": 100}
"""The needle's position, as a depth in % of the documents (the plot's axis)."""
BASELINE = "none"
PROBES_FILE = "probes.json"


def probe_groups(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (model, format): the probe table, the U's depth and the lifts, from the records that carry a probe."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        probe = record.get("probe")
        if isinstance(probe, dict):
            grouped[(str(record.get("model") or ""), str(probe["format"]))].append(record)
    return [_group(model, fmt, rows) for (model, fmt), rows in sorted(grouped.items())]


def _group(model: str, fmt: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        kinds[str(record["probe"]["kind"])].append(record)
    documents = [int(r["probe"]["documents"]) for r in records]
    times = sorted(str(r.get("time", "")) for r in records if r.get("time"))
    return {
        "model": model,
        "format": fmt,
        "probes": len(records),
        "kinds": {kind: len(rows) for kind, rows in sorted(kinds.items())},
        "documents": [min(documents), max(documents)],
        "first": times[0] if times else "",
        "last": times[-1] if times else "",
        **_tables(records),
        # Each kind apart: a ranked strategy's lift on `literal` probes is what it wins with a ranker that never
        # misses; on `nolima` probes, what it wins where the ranker must make a hop (contextlift.strategies.probes).
        "by_kind": {kind: {"probes": len(rows), **_tables(rows)} for kind, rows in sorted(kinds.items())},
        # The kinds a ranker can find together: a ranked pipeline's lift must hold there (eval.policy_writer).
        "findable": _pooled([row for kind in FINDABLE_KINDS for row in kinds.get(kind, [])]),
    }


def _pooled(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    return {"probes": len(records), **_tables(records)} if records else None


def _tables(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The probe table of `records`: accuracy by position per pipeline, the U's depth and the lifts over `none`."""
    # scores[strategy][(probe, position)] = 1.0 / 0.0; errors are left out (no answer to score).
    scores: dict[str, dict[tuple[int, str], float]] = defaultdict(dict)
    errors: dict[str, int] = defaultdict(int)
    calls: dict[str, list[float]] = defaultdict(list)
    seconds: dict[str, list[float]] = defaultdict(list)
    order: list[str] = []
    for number, record in enumerate(records):
        for run in record["probe"]["runs"]:
            strategy = run["strategy"]
            if strategy not in order:
                order.append(strategy)
            calls[strategy].append(float(run.get("calls", 0)))
            seconds[strategy].append(float(run.get("seconds", 0.0)))
            if run.get("error"):
                errors[strategy] += 1
                continue
            scores[strategy][(number, run["position"])] = float(bool(run["correct"]))
    accuracy = []
    for strategy in order:
        for position in POSITIONS:
            values = [v for (_, at), v in scores[strategy].items() if at == position]
            share = estimate(values)
            low, high = wilson(share.value, share.n) if share.n else (float("nan"), float("nan"))
            accuracy.append({"strategy": strategy, "position": position, "depth": POSITIONS[position],
                             "value": share.value, "ci95": [low, high], "n": share.n})  # fmt: skip
    return {
        "strategies": order,
        "errors": dict(errors),
        "accuracy": accuracy,
        "u_depth": {strategy: _u_depth(scores[strategy]) for strategy in order},
        "lift": _lifts(scores, order, calls, seconds),
    }


def _u_depth(scores: dict[tuple[int, str], float]) -> dict[str, Any] | None:
    """The edges' mean minus the middle, paired per probe (probes answered at all three positions)."""
    probes = sorted({number for number, _ in scores})
    whole = [p for p in probes if all((p, at) in scores for at in POSITIONS)]
    if not whole:
        return None
    edges = [(scores[(p, "first")] + scores[(p, "last")]) / 2 for p in whole]
    middle = [scores[(p, "middle")] for p in whole]
    lift = paired_lift(edges, middle)
    return {"value": lift.value, "ci95": [lift.low, lift.high], "n": lift.n, "p": lift.p, "test": lift.test}


def _lifts(
    scores: dict[str, dict[tuple[int, str], float]],
    order: list[str],
    calls: dict[str, list[float]],
    seconds: dict[str, list[float]],
) -> list[dict[str, Any]]:
    """Each pipeline's paired lift over `none` on the (probe, position) pairs both answered; Holm over them."""
    baseline = scores.get(BASELINE, {})
    rows: list[dict[str, Any]] = []
    for strategy in (s for s in order if s != BASELINE):
        pairs = sorted(set(scores[strategy]) & set(baseline))
        if not pairs:
            continue
        treated, base = [scores[strategy][k] for k in pairs], [baseline[k] for k in pairs]
        lift = paired_lift(treated, base)
        middle = [k for k in pairs if k[1] == "middle"]
        rows.append({
            "strategy": strategy,
            "value": lift.value,
            "ci95": [lift.low, lift.high],
            "n": lift.n,
            "wins": lift.wins,
            "losses": lift.losses,
            "p": lift.p,
            "test": lift.test,
            "middle": (sum(scores[strategy][k] - baseline[k] for k in middle) / len(middle)) if middle else None,
            "cost": {
                "calls_vs_none": _ratio(calls[strategy], calls[BASELINE]),
                "p50_s_vs_none": _ratio(seconds[strategy], seconds[BASELINE], median=True),
            },
        })  # fmt: skip
    for row, adjusted in zip(rows, holm([r["p"] for r in rows]), strict=True):
        row["p_holm"] = adjusted
        row["family"] = len(rows)
        share = sum(baseline.values()) / len(baseline) if baseline else 0.0
        discordant = (row["wins"] + row["losses"]) / row["n"] if row["n"] else None
        row["detectable"] = detectable_lift(row["n"], share, len(rows), discordant)
        row["significant"] = significant(row)
        row["harmful"] = harmful(row)
    return rows


def _ratio(values: list[float], baseline: list[float], *, median: bool = False) -> float:
    summary = statistics.median if median else statistics.fmean
    base = summary(baseline) if baseline else 0.0
    return round(summary(values) / base, 3) if values and base > 0 else 1.0


def probe_section(groups: Sequence[dict[str, Any]], out: Path) -> list[str]:
    """The report's section (with a position plot per group, drawn into `out/plots` when matplotlib is there)."""
    if not groups:
        return []
    lines = [
        "## Positional probes",
        "",
        "A synthetic fact (a needle with made-up names and a seven-digit value found nowhere in the request) "
        "written into one of the request's own documents, that document placed first, in the middle and last "
        "among the others, the question replaced by the probe's in the request's own prompt shape; scored by "
        "whether the answer holds the value. `literal` needles are asked in their own words (RULER), `one-hop` "
        "ones through a landmark's city (NoLiMa); both name the needle's made-up person, so a ranker that matches "
        "words always finds it, and a ranked strategy's lift there is what it wins with a ranker that never misses. "
        "`nolima` questions share no word with the needle, and two other documents name the question's city: "
        "there a ranker must make the hop, as real retrieval must, and `contextlift policy` reads a ranked "
        "strategy's lift from these alone (the table by kind). Accuracy with Wilson 95% intervals; *U depth* is "
        "the edges' mean minus the middle, paired per probe (sign test). A lift is each pipeline's paired "
        "difference from `none` over every (probe, position) pair; it holds when above zero with at least "
        f"{MIN_DISCORDANT} pairs that differ and Holm-corrected exact p below {ALPHA}, the eval's own rule.",
    ]
    for group in groups:
        lines += _group_lines(group, out)
    return lines


def _group_lines(group: dict[str, Any], out: Path) -> list[str]:
    # The model, format and pipelines are what a sink says: each a code span, bounded. A kind is a name of the
    # proxy's (contextlift.eval.sinks reads no other) and a time is shown only as the date it is.
    kinds = ", ".join(f"{n} {kind}" for kind, n in group["kinds"].items())
    lines = [
        "",
        f"### Probe table: {code_span(group['model'] or '(no model)')}, format {code_span(group['format'])}",
        "",
        f"{group['probes']} probes ({kinds}), {group['documents'][0]} to {group['documents'][1]} documents, "
        f"{_date(group['first'])} to {_date(group['last'])}.",
        "",
        "| pipeline | first | middle | last | U depth (edges - middle) | n |",
        "|---|---|---|---|---|---|",
    ]
    cells = {(a["strategy"], a["position"]): a for a in group["accuracy"]}
    for strategy in group["strategies"]:
        shown = [_share(cells[(strategy, at)]) for at in POSITIONS]
        depth = group["u_depth"].get(strategy)
        depth_text = (
            "-" if depth is None else f"{depth['value']:+.3f} [{depth['ci95'][0]:+.2f}, {depth['ci95'][1]:+.2f}]"
        )
        n = max(cells[(strategy, at)]["n"] for at in POSITIONS)
        lines.append(f"| {code_span(strategy)} | {' | '.join(shown)} | {depth_text} | {n} |")
    if group["lift"]:
        lines += [
            "",
            "| pipeline | lift over none | 95% CI | in the middle | wins/losses | p (Holm) | holds | detectable "
            "| calls x |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in group["lift"]:
            verdict = "yes" if row["significant"] else "significant loss" if row["harmful"] else "no"
            middle = "-" if row["middle"] is None else f"{row['middle']:+.3f}"
            detectable = "-" if row["detectable"] is None else f"{row['detectable']:.3f}"
            lines.append(
                f"| {code_span(row['strategy'])} | {row['value']:+.3f} | {_signed(row['ci95'])} | "
                f"{middle} | {row['wins']}/{row['losses']} | {row['p_holm']:.2g} (/{row['family']}) | {verdict} | "
                f"{detectable} | {row['cost']['calls_vs_none']:.2f} |"
            )
    by_kind = [(kind, row) for kind, table in group.get("by_kind", {}).items() for row in table["lift"]]
    if len(group.get("by_kind", {})) > 1 and by_kind:
        lines += [
            "",
            "By kind (each its own Holm family):",
            "",
            "| kind | probes | pipeline | lift over none | 95% CI | wins/losses | p (Holm) | holds |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for kind, row in by_kind:
            verdict = "yes" if row["significant"] else "significant loss" if row["harmful"] else "no"
            lines.append(
                f"| {code_span(kind)} | {group['by_kind'][kind]['probes']} | {code_span(row['strategy'])} | "
                f"{row['value']:+.3f} | {_signed(row['ci95'])} | {row['wins']}/{row['losses']} | "
                f"{row['p_holm']:.2g} (/{row['family']}) | {verdict} |"
            )
    plot = _plot(group, out)
    if plot:
        lines += ["", f"![probe accuracy by position]({plot})"]
    return lines


def _date(time: str) -> str:
    return shown_date(time) or "an unknown date"


def _signed(interval: Sequence[float]) -> str:
    return f"[{interval[0]:+.3f}, {interval[1]:+.3f}]"


def _share(cell: dict[str, Any]) -> str:
    if not cell["n"]:
        return "-"
    return f"{cell['value']:.2f} [{cell['ci95'][0]:.2f}, {cell['ci95'][1]:.2f}]"


def _plot(group: dict[str, Any], out: Path) -> str | None:
    """The eval's position plot for the group, relative to `out`; None without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None
    from contextlift.eval.report.plots import position_plot

    matplotlib.use("Agg")
    folder = out / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"probe-{group['model']}-{group['format']}").strip("-")[:100]
    path = folder / f"{slug}.png"
    cells = [{**a, "position": a["depth"]} for a in group["accuracy"] if a["n"]]
    meta = {"position_unit": "needle document's depth (% of documents: first, middle, last)"}
    position_plot(cells, [], group["strategies"], meta, path, f"probes · {group['model']} · {group['format']}")
    return f"plots/{path.name}"

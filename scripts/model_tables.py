"""The references answered on each embedded model, side by side: reads the reports `scripts/reference_eval_model`
wrote under docs/results/models/MODEL/SHAPE and prints, per shape and distractor regime, one row per model and
pipeline (accuracy with the gold first / in the middle / last, the lift over `none` on the same cases with its
interval, wins/losses, Holm's p and the A/A floor, and whether it holds by the report's verdict rule); and draws
`none`'s accuracy by position, one line per model, for each shape and regime (docs/results/models/u-curve-*.png).

    .venv/bin/python scripts/model_tables.py            # prints the tables
    .venv/bin/python scripts/model_tables.py --write    # writes docs/results/models/index.md and its plots
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from contextlift.eval.verdicts.stats import pairs_to_decide
from contextlift.proxy.embedded_models import MODELS

ROOT = Path(__file__).resolve().parents[1]
PLAIN = {
    "paper": "the paper's prompt",
    "separated": 'LangChain\'s stuff chain, `"\\n\\n---\\n\\n"` join',
    "blank": "LangChain's stuff chain, its default blank-line join",
}
"""The prompt shapes, each a report folder of the runs before gates (`none`'s u-curves are drawn from these)."""
SHAPES = {
    **PLAIN,
    **{
        f"{shape}-gated{regime}": f"{title}, ranked steps behind their gates, `pick`{note}"
        for shape, title in PLAIN.items()
        for regime, note in (("", ""), ("-hard", " (hard distractors only)"))
    },
}
"""Every report folder `scripts/reference_eval_model MODEL RUN` writes, and its title."""
REGIMES = {"standard": "easy", "hard": "hard"}
POSITIONS = (0, 4, 9)
"""The gold's index among 10 documents at 0%, 50% and 100%."""


def _report(folder: Path) -> dict[str, Any] | None:
    path = folder / "results.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _holds(row: dict[str, Any]) -> str:
    if row["value"] > 0 and row["wins"] + row["losses"] >= 10 and row.get("p_holm", 1) < 0.05:
        return "yes" if row["ci95"][0] > row.get("floor", 0) else "no (inside the floor)"
    if row["value"] < 0 and row["wins"] + row["losses"] >= 10 and row.get("p_holm", 1) < 0.05:
        return "a significant loss"
    return "no"


def _to_decide(lift: dict[str, Any]) -> str:
    """The paired cases at which a lift of this size, with this share of pairs differing, would hold with 80% power
    (the eval's own reckoning); `-` where nothing differed or the lift is not above zero."""
    if lift["value"] <= 0 or not lift["wins"] + lift["losses"]:
        return "-"
    needed = pairs_to_decide(lift["value"], (lift["wins"] + lift["losses"]) / lift["n"], lift.get("family", 1))
    return "-" if needed is None else str(needed)


def _cells(report: dict[str, Any], variant: str, strategy: str) -> dict[int, dict[str, Any]]:
    """The accuracy rows of one regime and pipeline, by the gold's position."""
    return {
        row["position"]: row
        for row in report["accuracy"]
        if row["variant"] == variant and row["strategy"] == strategy and row["position"] in POSITIONS
    }


def _by_position(report: dict[str, Any], variant: str, strategy: str) -> str:
    cells = _cells(report, variant, strategy)
    return " / ".join(f"{cells[p]['value']:.2f}" if p in cells else "-" for p in POSITIONS)


def _n_per_position(report: dict[str, Any], variant: str) -> int:
    sizes = [row["n"] for row in report["accuracy"] if row["variant"] == variant and row["position"] == 0]
    return max(sizes, default=0)


def tables(root: Path) -> list[str]:
    lines: list[str] = []
    for shape, title in SHAPES.items():
        for variant, regime in REGIMES.items():
            rows = []
            for name in MODELS:
                report = _report(root / name / shape)
                if report is None:
                    continue
                floor = next((f for f in report["noise_floor"] if f["variant"] == variant), None)
                floor_text = f"{floor['floor']:.3f} ({floor['n']})" if floor else "-"
                n = _n_per_position(report, variant)
                none = _by_position(report, variant, "none")
                rows.append(f"| `{name}` | `none` | {none} | | | | | {3 * n} | {floor_text} | | |")
                for lift in report["lift"]:
                    if lift["variant"] != variant or lift["size"] is not None:
                        continue
                    ci = f"[{lift['ci95'][0]:+.3f}, {lift['ci95'][1]:+.3f}]"
                    rows.append(
                        f"| `{name}` | `{lift['strategy']}` | {_by_position(report, variant, lift['strategy'])} | "
                        f"{lift['value']:+.3f} | {ci} | {lift['wins']}/{lift['losses']} | "
                        f"{lift.get('p_holm', lift['p']):.2g} /{lift.get('family', 1)} | {lift['n']} | {floor_text} | "
                        f"{_holds(lift)} | {_to_decide(lift)} |"
                    )
            if not rows:
                continue
            lines += [
                f"## {title}, {regime} distractors",
                "",
                "| model | pipeline | first / middle / last | lift | 95% CI | wins/losses | p (Holm) | n | floor "
                "| holds | n to decide |",
                "|---|---|---|---|---|---|---|---|---|---|---|",
                *rows,
                "",
            ]
    return lines


def summary(root: Path, strategy: str | None) -> list[str]:
    """One row per shape and regime, one column per model: `none`'s accuracy by position (strategy None), or the
    lift of `strategy` over it with its wins/losses."""
    names = list(MODELS)
    lines = [
        "| prompt, distractors | " + " | ".join(f"`{name}`" for name in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for shape, title in SHAPES.items():
        for variant, regime in REGIMES.items():
            cells = []
            for name in names:
                report = _report(root / name / shape)
                if report is None:
                    cells.append("not run")
                elif strategy is None:
                    cells.append(_by_position(report, variant, "none"))
                else:
                    found = [
                        r
                        for r in report["lift"]
                        if r["variant"] == variant and r["size"] is None and r["strategy"] == strategy
                    ]
                    cells.append(
                        f"{found[0]['value']:+.3f} ({found[0]['wins']}/{found[0]['losses']})" if found else "-"
                    )
            if any(cell != "not run" for cell in cells):
                lines.append(f"| {title}, {regime} | " + " | ".join(cells) + " |")
    return lines


def draw(root: Path) -> list[Path]:
    """`none`'s accuracy by the gold's position, one line per model with its 95% interval, per shape and regime."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    drawn = []
    for shape, title in PLAIN.items():
        for variant, regime in REGIMES.items():
            figure = Figure(figsize=(5.5, 3.6))
            axes = figure.subplots()
            plotted = False
            for offset, name in enumerate(MODELS):
                report = _report(root / name / shape)
                if report is None:
                    continue
                cells = _cells(report, variant, "none")
                if not cells:
                    continue
                xs = [p + 1 + 0.12 * (offset - 1) for p in POSITIONS if p in cells]  # side by side, not over
                ys = [cells[p]["value"] for p in POSITIONS if p in cells]
                low = [max(0.0, cells[p]["value"] - cells[p]["ci95"][0]) for p in POSITIONS if p in cells]
                high = [max(0.0, cells[p]["ci95"][1] - cells[p]["value"]) for p in POSITIONS if p in cells]
                n = cells[POSITIONS[0]]["n"]
                axes.errorbar(xs, ys, yerr=[low, high], marker="o", capsize=3, label=f"{name} (n = {n})")
                plotted = True
            if not plotted:
                continue
            axes.set_title(f"none, {title}, {regime} distractors", fontsize=9)
            axes.set_xlabel("position of the gold document among 10")
            axes.set_ylabel("accuracy")
            axes.set_xticks([p + 1 for p in POSITIONS])
            axes.set_ylim(-0.05, 1.05)
            axes.legend(fontsize=7)
            figure.tight_layout()
            path = root / f"u-curve-{shape}-{regime}.png"
            figure.savefig(path, dpi=110)
            drawn.append(path)
    return drawn


def reports(root: Path) -> list[str]:
    """One line per report: the command that reproduces it, its upstream and its run."""
    lines = []
    for name in MODELS:
        for shape in SHAPES:
            report = _report(root / name / shape)
            if report is None:
                continue
            run = json.loads((root / name / shape / "run.json").read_text(encoding="utf-8"))
            upstreams = ", ".join(f"`{fingerprint}`" for fingerprint in run.get("upstreams") or {})
            per_position = max(
                (int(r["n"]) for r in report.get("accuracy", []) if r.get("position") is not None), default=10
            )
            samples = "" if per_position == 10 else f"SAMPLES={per_position} "
            lines.append(
                f"- [{name} / {shape}]({name}/{shape}/report.md): `{samples}scripts/reference_eval_model {name} "
                f"{shape}`, upstream {upstreams or 'not recorded'}"
            )
    return lines


def page(root: Path, drawn: list[Path]) -> str:
    """docs/results/models/index.md: the reports, the tables and the curves."""
    lines = [
        "# The references on each embedded model",
        "",
        "Written by `.venv/bin/python scripts/model_tables.py --write` from the reports below; the summary and what",
        "follows from it: [results](../index.md#three-embedded-models-side-by-side). Lost in the Middle's QA at 10",
        "documents, generated fictional facts (no model knows the answers), the gold first / in the middle (index 4) /",
        "last, 10 questions per position and regime (n = 30 paired cases per row; 30 per position where a report's",
        "command says `SAMPLES=30`), `none` re-asked on 6 cases per regime for the A/A floor. The runs named `-gated`",
        "ask every ranked step behind its ranker's gate (lexical, stemmed) and `pick`, the model naming the passages.",
        "Accuracy is `best_subspan_em`; lifts, intervals, tests and the verdict rule are the",
        "report's ([reading a lift](../index.md#reading-a-lift)); Holm's family is the pipelines of one report and",
        "regime (`/1` or `/2`).",
        "",
        *reports(root),
        "",
        *tables(root),
    ]
    for path in drawn:
        lines += [f"![{path.stem}]({path.name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT / "docs" / "results" / "models")
    parser.add_argument("--no-plots", action="store_true", help="print the tables only")
    parser.add_argument("--write", action="store_true", help="write ROOT/index.md with the tables and the plots")
    parser.add_argument(
        "--summary", metavar="PIPELINE", nargs="?", const="none", help="print one table, a column per model: none's "
        "accuracy by position, or PIPELINE's lift over it"
    )  # fmt: skip
    args = parser.parse_args()
    if args.summary:
        print("\n".join(summary(args.root, None if args.summary == "none" else args.summary)))
        return 0
    drawn = [] if args.no_plots else draw(args.root)
    if args.write:
        (args.root / "index.md").write_text(page(args.root, drawn), encoding="utf-8")
        print(f"wrote {args.root / 'index.md'}")
        return 0
    print("\n".join(tables(args.root)))
    for path in drawn:
        print(f"drew {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

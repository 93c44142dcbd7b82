"""What `excerpt; min_margin=T` would have scored on a committed report's answers: on each case, `excerpt`'s answer
where its ranker's margin on that case (kept in samples.jsonl) is at least T, `none`'s answer elsewhere (a step that
adds nothing sends the body `none` sends, so `none`'s answer is the one it would get), paired with `none` and tested
as the eval tests a lift. The threshold is the one the report chose on the questions of even sample number (`A signal
at request time`); the odd ones are the check it was not chosen on.

    .venv/bin/python scripts/excerpt_gate.py                      # reference-unmovable-langchain, lexical, 0.12
    .venv/bin/python scripts/excerpt_gate.py REPORT_DIR --threshold 0.2 --pipeline "excerpt; ranker=minilm"
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from contextlift.eval.case_rankings import pipeline_ranker
from contextlift.eval.verdicts.stats import paired_lift

REPORT = Path(__file__).resolve().parents[1] / "docs/results/reference-unmovable-langchain"


def pairs(report: Path, pipeline: str) -> Iterator[tuple[str, int, float, float, float | None]]:
    """(variant, sample, the pipeline's score, none's score, its ranker's margin) per case both answered."""
    cases: dict[str, dict[str, dict[str, Any]]] = {}
    for line in (report / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["position"] not in (None, "None"):
            cases.setdefault(row["case"], {})[row["strategy"]] = row
    ranker = pipeline_ranker(pipeline) or "lexical"
    for answers in cases.values():
        if "none" not in answers or pipeline not in answers:
            continue
        treated = answers[pipeline]
        ranking = treated["ranking"]
        ranking = ranking if isinstance(ranking, dict) else ast.literal_eval(ranking)
        margin = ranking["rankers"].get(ranker, {}).get("margin")
        score = float(treated["score"])
        yield treated["variant"], int(treated["sample"]), score, float(answers["none"]["score"]), margin


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?", type=Path, default=REPORT)
    parser.add_argument("--pipeline", default="excerpt; ranker=lexical")
    parser.add_argument("--threshold", type=float, default=0.12)
    args = parser.parse_args()
    rows = list(pairs(args.report, args.pipeline))
    print(f"{args.report.name}: `{args.pipeline}` against `none`, gated at margin >= {args.threshold:g}")
    print("| questions | variant | gate | n | quoted | lift | 95% CI | wins/losses | p |")
    print("|---|---|---|---|---|---|---|---|---|")
    for half in ("all", "odd"):
        for variant in [*sorted({r[0] for r in rows}), "all"]:
            chosen = [r for r in rows if variant in ("all", r[0]) and (half == "all" or r[1] % 2 == 1)]
            for gate in ("none", f">= {args.threshold:g}"):
                opened = [gate == "none" or (m is not None and m >= args.threshold) for *_, m in chosen]
                treated = [t if g else b for (_, _, t, b, _), g in zip(chosen, opened, strict=True)]
                lift = paired_lift(treated, [b for _, _, _, b, _ in chosen])
                print(
                    f"| {half} | {variant} | {gate} | {lift.n} | {sum(opened)} | {lift.value:+.3f} | "
                    f"[{lift.low:+.3f}, {lift.high:+.3f}] | {lift.wins}/{lift.losses} | {lift.p:.2g} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does a policy rule on the ranker's margin beat every single pipeline? Measured on the second reference run.

For each of its litm-qa cases (10 and 20 documents, easy and hard distractors, gold first / middle / last) the
script ranks the documents with a ranker (default minilm), takes the margin `auto` would read (proxy.policy's
`ranker_margin`), and routes the case: a one-call ranking pipeline (`reorder; order=promote` or
`filter, reorder`) when the margin is at least a threshold, another pipeline (`none`, `recite`, `fact`) below it.
Each case's score under each pipeline is the run's own (docs/results/reference-2/samples.jsonl), so no model is
called. The threshold and the two pipelines are chosen on the even-numbered questions and the
rule is scored on the odd-numbered ones only, against `none` and each single pipeline, per regime, with McNemar's
exact test: a threshold picked and judged on the same questions would flatter it.

    .venv/bin/python scripts/margin_rule.py --out docs/results/reference-rankers/margin-rule.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import defaultdict
from pathlib import Path

from contextlift.eval.plan import build_cases, make_plan
from contextlift.eval.sources import find_sources
from contextlift.eval.verdicts.stats import newcombe_paired, sign_test
from contextlift.proxy.policy import ranker_margin
from contextlift.strategies import SentenceTransformerEmbedder, parse_request
from contextlift.strategies.rankers import RankerSet, published_rankers, rank_documents

ROOT = Path(__file__).resolve().parents[1]
PROMOTE = "reorder; order=promote"
ABOVE = (PROMOTE, "filter, reorder")
"""The one-call pipelines that rest on the ranking: for requests where one document stands out."""
BELOW = ("none", "recite", "fact")
"""What a close call gets: nothing, or a pipeline that reads every document."""
SINGLES = (*ABOVE, *BELOW[1:])


async def margins(ranker: str) -> dict[str, float]:
    plan = make_plan(
        "full", ["litm-qa"], ["none"], ["10,20"], ["0%,50%,100%"], ["30"], ["litm-qa.distractors=easy,hard"], 0
    )
    cases, _ = build_cases(plan, find_sources(None))
    rankers = RankerSet(published_rankers(), embedder=SentenceTransformerEmbedder())
    found: dict[str, float] = {}
    for case in cases:
        if case.position is None:
            continue
        chat = parse_request({"model": "m", "messages": case.messages})
        ranking = await rank_documents(chat.question, chat.documents, rankers, ranker)
        margin = ranker_margin(ranking.scores)
        if margin is not None and ranking.fallback is None:
            found[case.key] = margin
    return found


def compare(routed: list[float], other: list[float]) -> str:
    wins = sum(1 for a, b in zip(routed, other, strict=True) if a > b)
    losses = sum(1 for a, b in zip(routed, other, strict=True) if a < b)
    both = sum(1 for a, b in zip(routed, other, strict=True) if a == b == 1.0)
    low, high = newcombe_paired(both, wins, losses, len(routed) - both - wins - losses)
    lift = (wins - losses) / len(routed)
    return f"{lift:+.3f} [{low:+.3f}, {high:+.3f}], {wins}/{losses}, p {sign_test(wins, losses):.2g}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranker", default="minilm")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--margins", type=Path, help="a JSON file of the margins: read if present, else written")
    args = parser.parse_args()
    scores: dict[tuple[str, str], float] = {}
    meta: dict[str, tuple[str, int]] = {}
    for line in (ROOT / "docs/results/reference-2/samples.jsonl").read_text().splitlines():
        s = json.loads(line)
        if s["position"] is not None:
            scores[(s["case"], s["strategy"])] = float(s["score"])
            meta[s["case"]] = (s["variant"], int(s["sample"]))
    if args.margins and args.margins.exists():
        margin = json.loads(args.margins.read_text())
    else:
        margin = asyncio.run(margins(args.ranker))
        if args.margins:
            args.margins.write_text(json.dumps(margin))
    keys = sorted(k for k in meta if k in margin)
    choose = [k for k in keys if meta[k][1] % 2 == 0]
    confirm = [k for k in keys if meta[k][1] % 2 == 1]

    def accuracy(cases: list[str], threshold: float, above: str, below: str) -> float:
        return sum(scores[(k, above if margin[k] >= threshold else below)] for k in cases) / len(cases)

    thresholds = sorted({round(margin[k], 3) for k in choose} | {0.0, 1.01})
    best = max(
        ((accuracy(choose, t, a, b), -t, a, b) for t in thresholds for a in ABOVE for b in BELOW),
        key=lambda x: (x[0], x[1]),
    )
    threshold, above, below = -best[1], best[2], best[3]
    # The fair rival: the one pipeline a team would switch on from the same even-numbered half.
    single = max(SINGLES, key=lambda p: sum(scores[(k, p)] for k in choose))
    lines = [
        f"# A margin rule on the second reference run ({args.ranker})",
        "",
        f"Rule: `{above}` when {args.ranker}'s margin is at least {threshold:.3f}, else `{below}`; chosen on the "
        f"{len(choose)} even-numbered questions' cases (accuracy {best[0]:.3f} there), scored below on the "
        f"{len(confirm)} odd-numbered ones, beside `{single}`, the single pipeline the even half picks. "
        "`.venv/bin/python scripts/margin_rule.py` reproduces it.",
        "",
        "| regime | n | routed above | rule | none | "
        + " | ".join(f"`{p}`" for p in SINGLES)
        + " | rule vs none: lift [95% CI], wins/losses, p | rule vs the single pipeline the even half picks | "
        "rule vs the regime's best single pipeline, picked after the fact |",
        "|---" * (8 + len(SINGLES)) + "|",
    ]
    by_regime: dict[str, list[str]] = defaultdict(list)
    for k in confirm:
        by_regime[meta[k][0]].append(k)
    for regime, cases in sorted(by_regime.items()):
        routed = [scores[(k, above if margin[k] >= threshold else below)] for k in cases]
        singles = {p: [scores[(k, p)] for k in cases] for p in ("none", *SINGLES)}
        best_single = max((p for p in singles if p != "none"), key=lambda p: sum(singles[p]))
        share = sum(1 for k in cases if margin[k] >= threshold) / len(cases)
        cells = " | ".join(f"{sum(singles[p]) / len(cases):.3f}" for p in SINGLES)
        lines.append(
            f"| {regime} | {len(cases)} | {share:.2f} | {sum(routed) / len(cases):.3f} | "
            f"{sum(singles['none']) / len(cases):.3f} | {cells} | {compare(routed, singles['none'])} | "
            f"`{single}`: {compare(routed, singles[single])} | "
            f"`{best_single}`: {compare(routed, singles[best_single])} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

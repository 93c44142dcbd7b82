"""`contextlift eval-rankers`: how well each ranker finds the gold document, without a model. The litm-qa cases of
the chosen regimes are detected as the proxy detects them, ranked by each ranker, and scored by the gold's rank:
gold first (the share of cases where it ranks first, with Wilson's 95% interval) and the mean reciprocal rank.

Besides the distractor regimes (easy, hard, squad), a `retriever` regime puts the hard cases' documents in the
order a retriever would send them: the gold at rank r with probability proportional to RETRIEVER_DECAY ** r, the
distractors in their order around it. It is the regime where the client's own order (`client`) carries signal.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from eval.cases import Case
from eval.plan import build_cases, make_plan
from eval.sources import find_sources
from eval.verdicts.stats import wilson
from strategies import ChatRequest, parse_request
from strategies.embedder import Embedder
from strategies.rankers import RankerSet, published_rankers, rank_documents

RANKERS = ("client", "lexical", "minilm", "fusion")
RETRIEVER_DECAY = 0.6
"""The gold's rank in the `retriever` regime falls off as 0.6 ** rank: first in 40% of cases, in the top three
in 78%, so the client's order is a signal without being the answer (a dense retriever's top-1 accuracy on NQ is
about 45%, its top-5 about 70%: Karpukhin et al. 2020, table 2)."""
RETRIEVER = "retriever"


def retriever_ordered(cases: Sequence[Case], seed: int) -> list[Case]:
    """The cases with the gold moved to a rank drawn as a retriever would place it (variant `retriever`)."""
    rng = random.Random(seed)
    ordered = []
    for case in cases:
        if case.position is None:
            continue
        weights = [RETRIEVER_DECAY**r for r in range(case.size)]
        rank = rng.choices(range(case.size), weights)[0]
        ordered.append(replace(case, variant=RETRIEVER, position=rank, prompt=_moved(case, rank)))
    return ordered


def _moved(case: Case, rank: int) -> str:
    """The case's prompt with its gold document line moved from `case.position` to `rank`."""
    lines = case.prompt.split("\n")
    slots = [i for i, line in enumerate(lines) if line.startswith("Document [")]
    # `Document [i](Title: t) text`: what follows the number moves; the numbers stay in order.
    bodies = [lines[i].split("](", 1)[1] for i in slots]
    bodies.insert(rank, bodies.pop(case.position or 0))
    for number, (line, body) in enumerate(zip(slots, bodies, strict=True), start=1):
        lines[line] = f"Document [{number}]({body}"
    return "\n".join(lines)


async def gold_ranks(cases: Sequence[Case], rankers: Sequence[str], embedder: Embedder | None) -> list[dict[str, Any]]:
    """Per case and ranker: the gold's rank (1 is first), from documents detected as the proxy detects them."""
    available = RankerSet(published_rankers(), embedder=embedder)
    rows = []
    for case in cases:
        if case.position is None:
            continue
        chat: ChatRequest = parse_request({"model": "m", "messages": case.messages})
        if len(chat.documents) != case.size:
            continue  # detection did not find the case's documents: not a ranking to score
        for name in rankers:
            ranking = await rank_documents(chat.question, chat.documents, available, name)
            rows.append(
                {
                    "variant": case.variant,
                    "size": case.size,
                    "ranker": name,
                    "rank": ranking.order().index(case.position) + 1,
                    "fallback": ranking.fallback,
                }
            )
    return rows


def summarise(ranks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant x size x ranker: gold first (share and 95% interval), mean reciprocal rank, n."""
    groups: dict[tuple[str, int, str], list[int]] = defaultdict(list)
    for row in ranks:
        groups[(row["variant"], row["size"], row["ranker"])].append(row["rank"])
    out = []
    for (variant, size, ranker), found in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        first = sum(1 for r in found if r == 1)
        low, high = wilson(first / len(found), len(found))
        out.append(
            {
                "variant": variant,
                "size": size,
                "ranker": ranker,
                "gold_first": first,
                "n": len(found),
                "gold_first_ci95": [low, high],
                "mrr": sum(1 / r for r in found) / len(found),
            }
        )
    return out


def render(rows: Sequence[dict[str, Any]], note: str) -> str:
    lines = [
        "# Rankers: where each puts the gold document",
        "",
        note,
        "",
        "| regime | documents | ranker | gold first | 95% CI | MRR | n |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        low, high = r["gold_first_ci95"]
        lines.append(
            f"| {r['variant']} | {r['size']} | {r['ranker']} | {r['gold_first']}/{r['n']} | [{low:.2f}, {high:.2f}] "
            f"| {r['mrr']:.3f} | {r['n']} |"
        )
    return "\n".join(lines) + "\n"


def run(
    out: Path,
    sizes: Sequence[int],
    samples: int,
    regimes: Sequence[str],
    rankers: Sequence[str],
    data: Path | None,
    seed: int,
    embedder: Embedder | None = None,
) -> list[dict[str, Any]]:
    """Build the cases, rank them with each ranker, write `rankers.md` and `rankers.json` under `out`.

    Raises:
        ValueError: an unknown ranker or regime, or data a regime needs and does not have.
    """
    unknown = set(rankers) - set(published_rankers())
    if unknown:
        raise ValueError(f"unknown ranker(s) {', '.join(sorted(unknown))}; choose from {', '.join(RANKERS)}")
    built = [r for r in regimes if r != RETRIEVER]
    if RETRIEVER in regimes and "hard" not in built:
        built.append("hard")
    plan = make_plan(
        "full",
        ["litm-qa"],
        ["none"],
        [",".join(map(str, sizes))],
        ["0%,50%,100%"],
        [str(samples)],
        [f"litm-qa.distractors={','.join(built)}"],
        seed,
    )
    cases, _ = build_cases(plan, find_sources(data))
    variants = {"easy": "standard", "squad": "hard-squad"}
    wanted = {variants.get(r, r) for r in regimes}
    # The gold first, in the middle and last: the client's order is no signal there (gold first in a third).
    chosen = [c for c in cases if c.position is not None and c.variant in wanted]
    if RETRIEVER in regimes:
        once = [c for c in cases if c.position == 0 and c.variant == "hard"]  # one case per question
        chosen += retriever_ordered(once, seed)
    if embedder is None and {"minilm", "fusion"} & set(rankers):
        from strategies import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
    rows = summarise(asyncio.run(gold_ranks(chosen, rankers, embedder)))
    out.mkdir(parents=True, exist_ok=True)
    note = (
        f"litm-qa (the paper's prompt), seed {seed}, {samples} questions per regime and size, each with the gold "
        f"first, in the middle and last (so `client` ranks it first in a third of the cases), except `retriever`: "
        f"one case per hard question, the gold's rank drawn as {RETRIEVER_DECAY} ** rank. Regimes: "
        f"{', '.join(regimes)}."
    )
    (out / "rankers.md").write_text(render(rows, note), encoding="utf-8")
    (out / "rankers.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return rows

"""Per case, what each ranker makes of it at request time: which unit it ranks first, where the gold lands, and the
margin by which its first unit leads. The report joins these to the answers (`eval.verdicts.ranker_split`) to split
a ranked pipeline's lift by whether its ranker was right, and to ask whether a signal the proxy has before it sends
anything (the margin, two rankers agreeing) tells the two apart.

The units are what a ranking step ranks: the documents the proxy finds, or, where it reads a context it may not
move (`none: ambiguous-chunks`, LangChain's blank-line join), the paragraphs it reads there. A unit is gold where it
is the case's gold document (the documents found, one per document of the case), else where it holds a gold answer
as `best_subspan_em` matches one: no distractor of litm-qa holds one, so these are the gold passage's paragraphs.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from contextlift.eval.cases import Case, Sample
from contextlift.eval.metrics import holds_answer
from contextlift.strategies import ChatRequest, StrategyRegistry, build_registry, parse_request, parse_selection
from contextlift.strategies.embedder import Embedder
from contextlift.strategies.rankers import DEFAULT_RANKER, RankerSet, published_rankers, rank_documents

SIGNAL_RANKERS = ("lexical", "minilm", "fusion")
"""Ranked for every case of a run that has a ranking step: the agreement signal reads lexical's and minilm's."""


def margin(scores: Sequence[float]) -> float | None:
    """The top score's lead over the second, as a share of its lead over the lowest: what the proxy's policies read
    as `ranker_margin` (proxy.policy.ranker_margin; the eval does not import the proxy). None for fewer than two."""
    if len(scores) < 2:
        return None
    ordered = sorted(scores, reverse=True)
    spread = ordered[0] - ordered[-1]
    return 0.0 if spread <= 0 else (ordered[0] - ordered[1]) / spread


def pipeline_ranker(strategy: str) -> str | None:
    """The ranker a pipeline's first ranking step ranks with (`ranker=`, else the default); None for a pipeline
    without one or one that does not parse."""
    try:
        steps = parse_selection(strategy)
    except ValueError:
        return None
    registry = _registry()
    for step in steps:
        if step.name in registry and getattr(registry.get(step.name), "ranks", False):
            return step.params.get("ranker", DEFAULT_RANKER)
    return None


@functools.cache
def _registry() -> StrategyRegistry:
    return build_registry()


def units(case: Case) -> tuple[ChatRequest, list[int]] | None:
    """The request a ranking step ranks (its documents, else the reading it may not move) and the indices of its
    gold units; None where the proxy finds nothing to rank or no unit is gold."""
    chat = parse_request({"model": "m", "messages": case.messages})
    if chat.documents:
        if len(chat.documents) == case.size and case.position is not None:
            return chat, [case.position]
        target = chat
    elif chat.unmovable is not None and chat.unmovable.documents:
        target = chat.unmovable
    else:
        return None
    gold = [i for i, unit in enumerate(target.documents) if holds_answer(unit.text, case.gold)]
    return (target, gold) if gold else None


async def case_rankings(
    cases: Iterable[Case], rankers: Sequence[str], embedder: Embedder | None
) -> dict[str, dict[str, Any]]:
    """Per case key: `units` (how many were ranked), `gold` (the gold units' indices) and per ranker `first` (the
    unit it ranks first), `gold_rank` (1: a gold unit first) and `margin`; a ranker that fell back is left out."""
    available = RankerSet(published_rankers(), embedder=embedder)
    found: dict[str, dict[str, Any]] = {}
    for case in cases:
        if case.position is None or case.strategies:
            continue  # a baseline's own case (closed-book, oracle): no ranked pipeline runs on it
        read = units(case)
        if read is None:
            continue
        target, gold = read
        by_ranker: dict[str, Any] = {}
        for name in rankers:
            ranking = await rank_documents(target.question, target.documents, available, name)
            if ranking.fallback is not None:
                continue  # the client's order, not the ranker's: no reading of it
            order = ranking.order()
            by_ranker[name] = {
                "first": order[0],
                "gold_rank": min(order.index(i) for i in gold) + 1,
                "margin": margin(ranking.scores),
            }
        found[case.key] = {"units": len(target.documents), "gold": gold, "rankers": by_ranker}
    return found


def attach_rankings(cases: Sequence[Case], samples: Sequence[Sample], strategies: Sequence[str]) -> list[Sample]:
    """The samples, each carrying its case's rankings (`Sample.ranking`) where a pipeline of the run ranks: by
    `SIGNAL_RANKERS` and every ranker a pipeline names. Without the embedder (no sentence-transformers) the rankers
    that need one are left out, not ranked in the client's order."""
    named = [r for r in (pipeline_ranker(s) for s in strategies) if r is not None]
    if not named:
        return list(samples)
    rankers = list(dict.fromkeys([*SIGNAL_RANKERS, *named]))
    available = published_rankers()
    embedder = load_embedder() if any(getattr(available.get(r), "needs_embedder", False) for r in rankers) else None
    found = asyncio.run(case_rankings(cases, rankers, embedder))
    return [replace(s, ranking=found[s.case]) if s.case in found else s for s in samples]


def load_embedder() -> Embedder | None:
    """MiniLM on the CPU, as `eval-rankers` ranks (fp32 on every machine); None without sentence-transformers."""
    try:
        from contextlift.strategies import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(device="cpu")
    except ImportError:
        return None

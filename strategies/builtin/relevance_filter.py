"""`filter`: drop the documents that are clearly not about the question, keep the rest in the client's order.

A retriever returns a fixed number of passages whatever the question; the least similar ones are often plain
distractors, and every distractor costs the model accuracy and the client tokens (Lost in the Middle, fig. 5:
accuracy falls as documents are added). Scores come from the step's ranker, as `reorder`'s do: MiniLM's cosine
similarities are read as they are; the scores of a ranker without a fixed scale (BM25, a rerank service, the
client's order) are rescaled to [0, 1] over the request's documents first, best 1 and worst 0. What it drops by
default depends on the ranker, as measured (`DEFAULT_CUTS`): where no cut kept the answer-bearing document often
enough, every document stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

from contextlift.strategies.plugin import ChatRequest, Param, Params, StepContext, Transform, note_unmeasured, rank
from contextlift.strategies.rankers import Ranking


@dataclass(frozen=True, slots=True)
class Cut:
    """Which documents `filter` keeps: those within `margin` of the best score (on the ranker's scale, rescaled to
    [0, 1] first for an unbounded ranker), at most `top` of them; `Cut()` keeps every document."""

    margin: float | None = None
    top: int | None = None


# Measured by scripts/filter_margins.py (docs/results/filter-margins: README.md gives every rule's figures and the
# command), without a model: litm-qa, 10 documents, 90 questions per regime (easy, hard and SQuAD distractors, each
# as passages and as LangChain chunks joined by `---`), each rule applied by `kept` below to the proxy's own
# rankings. Each ranker's cut is the rule that kept the gold document in at least 97% of the cases of every regime
# with the fewest documents kept:
# - minilm, margin 0.35 of the cosine: the gold kept in 90/90 everywhere; 1.3 (easy), 9.1 (hard), 7.4 (SQuAD),
#   3.5, 9.2 and 7.2 (their chunks) of 10 documents kept. 0.2, the old default, kept it in 71/90 hard chunks.
# - fusion, margin 0.8 of the rescaled scores: 88/90 at worst (easy and hard chunks), 7.2 to 7.6 documents kept.
# - lexical and client: every document stays. BM25 scores 0 an answer-bearing chunk that shares no word with the
#   question (no stemming: "filmed" is not "filming"), as low as every distractor, so no cut kept the gold in 97%
#   of the easy chunks (at best 87/90, the top 8; 0.2 kept it in 84/90, and in 39/90 hard chunks); the client's
#   order puts it last as often as first.
# Then each cut's accuracy with the embedded SmolLM2 against `none` (scripts/reference_eval_filter and
# reference_eval_filter_chunks, 90 pairs per regime: easy and hard passages, easy chunks; pooled by
# scripts/pooled_lift.py): a cut stays the default only where its pooled lift is not below zero.
# - minilm 0.35: +0.089 (18/10), -0.022 (5/7), +0.100 (12/3); pooled +0.056 [+0.002, +0.109], Holm p 0.17 /3.
# - fusion 0.8: -0.122 (5/16), -0.089 (8/16), +0.089 (13/5); pooled -0.041 [-0.098, +0.017]: withdrawn, so with
#   fusion every document stays unless the request sets `margin` or `top`.
# - lexical: every document stays, the answers `none`'s (0/0 on all 270 pairs).
RETENTION_CUTS: Mapping[str, Cut] = MappingProxyType(
    {"minilm": Cut(margin=0.35), "fusion": Cut(margin=0.8), "lexical": Cut(), "client": Cut()}
)
"""Per ranker, the cut that kept the answer-bearing document (docs/results/filter-margins)."""
LOST_ACCURACY = frozenset({"fusion"})
"""The rankers whose retention cut lost accuracy against `none` on the model measured (docs/results/reference-filter
and reference-filter-chunks): their default keeps every document."""
DEFAULT_CUTS: Mapping[str, Cut] = MappingProxyType(
    {ranker: Cut() if ranker in LOST_ACCURACY else cut for ranker, cut in RETENTION_CUTS.items()}
)
"""`filter`'s default per ranker, where the request sets neither `margin` nor `top`."""
MARGIN_MEASURED_WITH = frozenset(DEFAULT_CUTS)
"""The rankers whose default was measured: with another, every document stays unless the request sets `margin` or
`top`, and `filter` says `unmeasured-with=RANKER`."""


class RelevanceFilter(Transform):
    """Keeps the documents within `margin` of the best score, at most `top` of them, in the client's order; never
    none."""

    name: ClassVar[str] = "filter"
    moves: ClassVar[bool] = True
    ranks: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        Param("top", int, None, "keep at most this many of the most relevant documents", minimum=1, maximum=1_000),
        Param("margin", float, None, "keep the documents whose score is within this of the best one's (an unbounded "
              "ranker's rescaled to [0, 1]); unset: the ranker's measured default (minilm 0.35; with fusion, "
              "lexical, client or an unmeasured ranker every document stays)", minimum=0.0, maximum=2.0),
    )  # fmt: skip

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        ranked = await rank(request, params, context)
        note_unmeasured(context, ranked, ("margin", "top"), MARGIN_MEASURED_WITH)
        if ranked.fallback is not None:
            return request  # nothing to judge relevance by: every document stays
        margin, top = params.get("margin"), params.get("top")
        default = DEFAULT_CUTS.get(ranked.ranker, Cut())
        cut = Cut(
            margin=float(margin) if isinstance(margin, (int, float)) else default.margin,
            top=top if isinstance(top, int) else default.top,
        )
        chosen = set(kept(ranked, cut))
        if len(chosen) < len(request.documents):
            context.note(f"dropped={len(request.documents) - len(chosen)}")
        return request.with_documents([d for i, d in enumerate(request.documents) if i in chosen])


def kept(ranking: Ranking, cut: Cut) -> list[int]:
    """The indices of the documents `cut` keeps, best first; never none (an empty context answers nothing)."""
    scores = ranking.scores if ranking.bounded else _rescaled(ranking.scores)
    order = ranking.order()
    best = scores[order[0]]
    chosen = [i for i in order if cut.margin is None or scores[i] >= best - cut.margin]
    return chosen[: cut.top] if cut.top is not None else chosen


def _rescaled(scores: list[float]) -> list[float]:
    """Scores mapped onto [0, 1], best 1 and worst 0 (all 1 when they are equal)."""
    low, high = min(scores), max(scores)
    return [1.0 if high == low else (s - low) / (high - low) for s in scores]

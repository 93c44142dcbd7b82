"""`filter`: drop the documents that are clearly not about the question, keep the rest in the client's order.

A retriever returns a fixed number of passages whatever the question; the least similar ones are often plain
distractors, and every distractor costs the model accuracy and the client tokens (Lost in the Middle, fig. 5:
accuracy falls as documents are added). Scores come from the step's ranker, as `reorder`'s do: MiniLM's cosine
similarities are read as they are; the scores of a ranker without a fixed scale (BM25, a rerank service, the
client's order) are rescaled to [0, 1] over the request's documents first, best 1 and worst 0.
"""

from __future__ import annotations

from typing import ClassVar

from contextlift.strategies.plugin import ChatRequest, Param, Params, StepContext, Transform, note_unmeasured, rank

MARGIN_MEASURED_WITH = frozenset({"minilm"})
"""The rankers `margin`'s default was measured with: with another, `filter` says `unmeasured-with=RANKER`."""


class RelevanceFilter(Transform):
    """Keeps the documents within `margin` of the best score, at most `top` of them, in the client's order; never
    none."""

    name: ClassVar[str] = "filter"
    moves: ClassVar[bool] = True
    ranks: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        Param("top", int, None, "keep at most this many of the most relevant documents", minimum=1, maximum=1_000),
        Param("margin", float, 0.2, "keep the documents whose similarity is within this of the best one's",
              minimum=0.0, maximum=2.0),
    )  # fmt: skip
    # margin 0.2, measured with MiniLM only (MARGIN_MEASURED_WITH): on litm-qa (10 documents, 40 questions per
    # regime) all-MiniLM-L6-v2 scores the gold document at most 0.12 below the best one (easy: always the best;
    # hard, same-entity distractors: 0.12; SQuAD article paragraphs: 0.12), so 0.2 kept the gold in 120 of 120 and
    # kept 1.2 (easy), 6.6 (hard) and 3.9 (SQuAD) of the 10 documents.

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        ranked = await rank(request, params, context)
        note_unmeasured(context, ranked, "margin", MARGIN_MEASURED_WITH)
        if ranked.fallback is not None:
            return request  # nothing to judge relevance by: every document stays
        scores = ranked.scores if ranked.bounded else _rescaled(ranked.scores)
        ranking = ranked.order()
        best = float(scores[ranking[0]])
        kept = [i for i in ranking if float(scores[i]) >= best - float(params["margin"])]
        top = params.get("top")
        if isinstance(top, int):
            kept = kept[:top]
        # The best document always stays: an empty context answers nothing.
        chosen = set(kept) or {ranking[0]}
        if len(chosen) < len(request.documents):
            context.note(f"dropped={len(request.documents) - len(chosen)}")
        return request.with_documents([d for i, d in enumerate(request.documents) if i in chosen])


def _rescaled(scores: list[float]) -> list[float]:
    """Scores mapped onto [0, 1], best 1 and worst 0 (all 1 when they are equal)."""
    low, high = min(scores), max(scores)
    return [1.0 if high == low else (s - low) / (high - low) for s in scores]

"""`reorder`: rank documents by relevance to the question (the step's ranker: MiniLM by default, BM25, their
fusion, the client's own order, or a rerank service) and put the most relevant at the edges of the context,
where models use them best (Lost in the Middle, fig. 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, TypeVar

import anyio
import numpy as np

from contextlift.strategies.plugin import ChatRequest, Document, Param, Params, StepContext, Transform, rank

T = TypeVar("T")
ORDERS = ("edges-first", "edges-last", "descending", "promote")


def arrange(ranked: Sequence[T], order: str, *, original: Sequence[T] = (), top: int = 1) -> list[T]:
    """Place items given best first.

    - `edges-first`: ranks 1 3 5 ... 4 2, the best first (Haystack's LostInTheMiddleRanker);
    - `edges-last`: LangChain's and LlamaIndex's LongContextReorder, the best last for even counts;
    - `descending`: best first, as ranked;
    - `promote`: only the `top` best move, to the edges as `edges-first` places them (best first, second
      last, third second ...); the rest keep their `original` order in between. What the client's retriever
      ordered well stays where it was.
    """
    if order == "promote":
        promoted = list(ranked[:top])
        front, back = promoted[0::2], promoted[1::2]
        chosen = {id(item) for item in promoted}
        middle = [item for item in original if id(item) not in chosen]
        return front + middle + back[::-1]
    if order == "descending":
        return list(ranked)
    if order == "edges-first":
        front, back = list(ranked[0::2]), list(ranked[1::2])
        return front + back[::-1]
    if order == "edges-last":
        arranged: list[T] = []
        for index, item in enumerate(reversed(ranked)):
            if index % 2 == 1:
                arranged.append(item)
            else:
                arranged.insert(0, item)
        return arranged
    raise ValueError(f"unknown order {order!r}")


class Reorder(Transform):
    """Reorders (and with `budget`, trims) the documents by relevance to the question."""

    name: ClassVar[str] = "reorder"
    moves: ClassVar[bool] = True
    ranks: ClassVar[bool] = True
    params: ClassVar[tuple[Param, ...]] = (
        Param("order", str, "promote", "where the most relevant documents go", choices=ORDERS),
        Param("top", int, 1, "with order=promote: how many of the most relevant documents move to the edges",
              minimum=1, maximum=1_000),
        Param("budget", int, None, "drop the least relevant documents until they fit in this many tokens",
              minimum=1, maximum=1_000_000),
    )  # fmt: skip

    async def transform(self, request: ChatRequest, params: Params, context: StepContext) -> ChatRequest:
        ranking = await rank(request, params, context)
        # Stable: equal scores keep the client's order.
        ranked = [request.documents[i] for i in ranking.order()]
        budget = params.get("budget")
        if isinstance(budget, int):
            # Counting tokens is CPU work in proportion to the documents: not on the event loop.
            counts = await anyio.to_thread.run_sync(_token_counts, ranked, context)
            kept = _kept_within(counts, budget)
            if kept < len(ranked):
                context.note(f"dropped={len(ranked) - kept}")
            ranked = ranked[:kept]
        remaining = set(map(id, ranked))
        original = [d for d in request.documents if id(d) in remaining]
        return request.with_documents(arrange(ranked, str(params["order"]), original=original, top=int(params["top"])))


def _token_counts(documents: list[Document], context: StepContext) -> list[int]:
    return [context.services.tokenizer.count(d.raw or d.text) for d in documents]


def _kept_within(counts: list[int], budget: int) -> int:
    """How many of the best documents fit in `budget` tokens together."""
    totals = np.cumsum(counts)
    # The best document stays even when it alone is over the budget: an empty context answers nothing.
    return max(1, int(np.searchsorted(totals, budget, side="right")))

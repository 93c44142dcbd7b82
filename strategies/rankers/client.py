"""`client`: the order the client sent is the ranking. A RAG app's retriever already ordered its passages; this
ranker costs nothing and lets a step place them by that order (`reorder; ranker=client; order=edges-last` is
LangChain's LongContextReorder)."""

from __future__ import annotations

from collections.abc import Sequence

from contextlift.strategies.rankers.base import Ranker, RankerSet, client_order
from contextlift.strategies.request import Document


class ClientOrder(Ranker):
    name = "client"

    async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> list[float]:
        return client_order(len(documents))

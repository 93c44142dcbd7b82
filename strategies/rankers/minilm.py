"""`minilm`: cosine similarity of each document to the question under the in-process embedder (all-MiniLM-L6-v2,
bundled), the proxy's default ranker."""

from __future__ import annotations

from collections.abc import Sequence

from contextlift.strategies.embedder import embed_off_loop
from contextlift.strategies.rankers.base import Ranker, RankerSet
from contextlift.strategies.request import Document


class MiniLM(Ranker):
    name = "minilm"
    bounded = True
    needs_embedder = True

    async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> list[float]:
        texts = [question, *(embedding_text(d) for d in documents)]
        vectors = await embed_off_loop(rankers.require_embedder(), texts)
        # The vectors are unit length: the dot product is the cosine.
        return [float(s) for s in vectors[1:] @ vectors[0]]


def embedding_text(document: Document) -> str:
    """What is embedded for a document: its title, if any, on the line before its text."""
    return f"{document.title}\n{document.text}" if document.title else document.text

"""Rankers: what orders a request's documents by relevance to its question, for every step that ranks
(`reorder`, `filter`). A ranker is chosen per step with the `ranker` parameter (`reorder; ranker=lexical`), or by
the operator's default.

What lives here: the ranker protocol and the helper steps call (`base`), and the built-in in-process rankers, one
module each, published under the `contextlift.rankers` entry-point group exactly as a third-party ranker would
be: `client` (the order the client sent), `lexical` (BM25), `minilm` (the bundled sentence embedder), `fusion`
(reciprocal-rank fusion of other rankers). Rankers that call a service over HTTP (a rerank API, an embeddings
endpoint) are built by the proxy from its settings and handed in through `Services.rankers`, as the embedder is.

What it may import: the request model and the embedder seam of `strategies`; never `proxy` or `eval`.
"""

from contextlift.strategies.rankers.base import (
    DEFAULT_RANKER,
    ENTRY_POINT_GROUP,
    RANKER_PARAM_DESCRIPTION,
    Ranker,
    RankerFailure,
    RankerSet,
    Ranking,
    load_rankers,
    published_rankers,
    rank_documents,
    ranker_margin,
)

__all__ = [
    "DEFAULT_RANKER",
    "ENTRY_POINT_GROUP",
    "RANKER_PARAM_DESCRIPTION",
    "Ranker",
    "RankerFailure",
    "RankerSet",
    "Ranking",
    "load_rankers",
    "published_rankers",
    "rank_documents",
    "ranker_margin",
]

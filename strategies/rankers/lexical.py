"""`lexical`: BM25 (Lucene's variant, k1 1.5, b 0.75) of each document against the question, from bm25s, over an
index built for the request's own documents, each word cut to its stem by PyStemmer's Snowball stemmer in the
operator's language (`RankerSet.language`; English by default), so that "configure" finds "Configuration" and
"filmed" finds "filming". No model: a few milliseconds of CPU for twenty passages. It finds the passage that
shares the question's rare words, which an embedder trained for topical similarity misses when every passage is
about the same entity."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import anyio

from contextlift.strategies.rankers.base import DEFAULT_LANGUAGE, Ranker, RankerSet
from contextlift.strategies.rankers.minilm import embedding_text
from contextlift.strategies.request import Document

MAX_LEXICAL_CHARS = 100_000
"""Characters of each document that are indexed. BM25 reads every word, so an outsized document (a body limit
allows megabytes) would cost CPU in proportion; 100,000 characters are about 15,000 words, far past any passage a
retriever returns, and beyond them the document's scores barely move."""


class Lexical(Ranker):
    name = "lexical"

    async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> list[float]:
        texts = [embedding_text(d)[:MAX_LEXICAL_CHARS] for d in documents]
        language = rankers.language if rankers is not None else DEFAULT_LANGUAGE  # a caller with no set: the default
        return await anyio.to_thread.run_sync(bm25_scores, question[:MAX_LEXICAL_CHARS], texts, language)


def languages() -> tuple[str, ...]:
    """The languages `lexical` stems (Snowball's algorithms, as PyStemmer names them), and `none`: words as written."""
    import Stemmer

    return (*sorted(Stemmer.algorithms()), NO_STEMMING)


NO_STEMMING = "none"


_per_thread = threading.local()


def _stemmer(language: str) -> Callable[[list[str]], list[str]] | None:
    """PyStemmer's stemmer for `language` (its `stemWords`), None for `none`. One per language and worker thread:
    PyStemmer's stemmers are not thread-safe, and each keeps a cache of the words it has cut for later requests."""
    if language == NO_STEMMING:
        return None
    stemmers: dict[str, Callable[[list[str]], list[str]]] = _per_thread.__dict__.setdefault("stemmers", {})
    if language not in stemmers:
        import Stemmer

        stemmers[language] = Stemmer.Stemmer(language).stemWords
    return stemmers[language]


def _stopwords(language: str) -> str | None:
    """bm25s's stop-word list for `language` where it has one (English, German, French, ... 14 of them), else none."""
    return language if language in _BM25S_STOPWORDS else None


_BM25S_STOPWORDS = frozenset(
    {"english", "german", "dutch", "french", "spanish", "portuguese", "italian", "russian", "swedish", "norwegian",
     "turkish", "danish"}
)  # fmt: skip
"""The languages bm25s has stop words for that Snowball also stems (bm25s.tokenization._infer_stopwords)."""


def bm25_scores(question: str, texts: Sequence[str], language: str = DEFAULT_LANGUAGE) -> list[float]:
    """BM25 score of each text for the question, words stemmed in `language`; all zero when they share no indexed
    word."""
    import bm25s  # imported when first used: the serving path without a lexical ranker never loads it

    # bm25s logs each index it builds at debug level: one line per ranked request is noise, never news.
    logging.getLogger("bm25s").setLevel(logging.WARNING)

    stemmer, stopwords = _stemmer(language), _stopwords(language)
    corpus = bm25s.tokenize(list(texts), stopwords=stopwords, stemmer=stemmer, show_progress=False, return_ids=False)
    if not any(corpus):
        # No document holds a word the tokenizer indexes (numbers of one digit, symbols, stop words alone): bm25s
        # cannot build an index over an empty vocabulary (it raises), and nothing is there to rank by.
        return [0.0] * len(texts)
    query = bm25s.tokenize([question], stopwords=stopwords, stemmer=stemmer, show_progress=False, return_ids=False)[0]
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    ids = index.get_tokens_ids(list(query))
    if not ids:
        return [0.0] * len(texts)
    return [float(s) for s in index.get_scores_from_ids(ids)]

"""The ranker protocol, the set of rankers a proxy offers, and `rank_documents`, the one call every ranking
step makes: it never fails a request. A ranker that is down, slow, or answers nonsense leaves the documents in
the client's order, and the step reports which ranker fell back and why."""

from __future__ import annotations

import functools
import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import MappingProxyType

from contextlift.strategies.embedder import Embedder
from contextlift.strategies.request import Document

ENTRY_POINT_GROUP = "contextlift.rankers"
DEFAULT_RANKER = "lexical"
"""BM25 over the request's documents: measured as good as MiniLM for `reorder` at a hundredth of the cost, and no
torch (contextlift.proxy.settings.Settings.default_ranker says the figures)."""
DEFAULT_LANGUAGE = "english"
"""The language `lexical` stems words in where the operator names none (`Settings.lexical_language`)."""
log = logging.getLogger(__name__)


class RankerFailure(Exception):
    """A ranker that could not rank this request. `reason` is a short token for `X-Context-Strategy` and the
    metrics (`timeout`, `unreachable`, `http-503`, `bad-answer`, `circuit-open`): never text from the service."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class Ranker(ABC):
    """Scores documents against a question: higher is more relevant, one finite score per document."""

    name: str = ""
    bounded: bool = False
    """Whether scores are on a fixed scale across requests (cosine similarity): `filter`'s margin then reads them
    as they are; otherwise they are rescaled to [0, 1] over the request's documents first."""
    needs_embedder: bool = False
    """Whether it uses the in-process embedder (which must then be loaded before it runs)."""

    @abstractmethod
    async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> Sequence[float]:
        """One score per document, in the documents' order. CPU work runs off the event loop.

        Raises:
            RankerFailure: the ranker could not rank (the caller keeps the client's order).
        """


@dataclass(frozen=True, slots=True)
class Ranking:
    """A step's ranking: the scores it ranks by and, when the ranker fell back, why."""

    scores: list[float]
    ranker: str
    fallback: str | None = None
    bounded: bool = False
    """Whether the scores are on the ranker's fixed scale (`Ranker.bounded`); the client's order never is."""

    def order(self) -> list[int]:
        """Document indices, best first; equal scores keep the client's order."""
        return sorted(range(len(self.scores)), key=lambda i: (-self.scores[i], i))

    def margin(self) -> float | None:
        """`ranker_margin` of the scores; None where the ranker fell back (the client's order is no ranking)."""
        return None if self.fallback is not None else ranker_margin(self.scores)


def ranker_margin(scores: Sequence[float]) -> float | None:
    """The top score's lead over the second, as a share of its lead over the lowest: scale-free, so a margin
    means the same for cosine similarities, BM25 and a reranker's logits. None for fewer than two scores."""
    if len(scores) < 2:
        return None
    ordered = sorted(scores, reverse=True)
    spread = ordered[0] - ordered[-1]
    return 0.0 if spread <= 0 else (ordered[0] - ordered[1]) / spread


@dataclass(frozen=True, slots=True)
class RankerSet:
    """The rankers a proxy offers, by name, the default, and what they share."""

    rankers: Mapping[str, Ranker] = field(default_factory=dict)
    default: str = DEFAULT_RANKER
    embedder: Embedder | None = None
    observe: Callable[[str, str], None] | None = None
    """Told (ranker, outcome) once per ranking: `ok` or the fallback reason (the proxy's metrics)."""
    language: str = DEFAULT_LANGUAGE
    """The language `lexical` stems in (a Snowball algorithm's name), or `none` for words as written."""
    gates: Mapping[str, float] | None = None
    """Per ranker, the margin below which a ranked step does nothing (`rankers.gate`); None: the measured ones
    (`gate.GATES`). The operator's `ranker_gates` are merged over those."""

    def names(self) -> list[str]:
        return sorted(self.rankers)

    def get(self, name: str) -> Ranker:
        """The ranker of that name.

        Raises:
            RankerFailure: no such ranker (`unknown`); the proxy refuses such requests before this point.
        """
        ranker = self.rankers.get(name)
        if ranker is None:
            raise RankerFailure("unknown", name)
        return ranker

    def require_embedder(self) -> Embedder:
        if self.embedder is None:
            raise RankerFailure("no-embedder")
        return self.embedder


def load_rankers() -> dict[str, Ranker]:
    """Every ranker published under the `contextlift.rankers` entry-point group, the built-ins among them.

    Raises:
        ValueError: two published rankers share a name.
    """
    found: dict[str, Ranker] = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        ranker = entry.load()()
        ranker.name = ranker.name or entry.name
        if ranker.name in found:
            raise ValueError(f"a ranker named {ranker.name!r} is already registered")
        found[ranker.name] = ranker
    return found


@functools.cache
def published_rankers() -> Mapping[str, Ranker]:
    """`load_rankers()`, read once per process (the entry points do not change while it runs)."""
    return MappingProxyType(load_rankers())


RANKER_PARAM_DESCRIPTION = (
    "what ranks the documents: client (the order sent), lexical (BM25), minilm (embeddings), fusion, or a ranker "
    "the operator configured; unset: the operator's default"
)


async def rank_documents(
    question: str, documents: Sequence[Document], rankers: RankerSet, name: str | None = None
) -> Ranking:
    """The documents ranked by `name` (default: the set's default). Never raises for the ranker's sake: on a
    `RankerFailure`, a wrong number of scores, a score that is not finite, or an error in a plugin ranker, the
    ranking is the client's order and `fallback` says why."""
    chosen = name or rankers.default
    try:
        ranker = rankers.get(chosen)
        scores = [float(s) for s in await ranker.scores(question, documents, rankers)]
        if len(scores) != len(documents) or not all(math.isfinite(s) for s in scores):
            raise RankerFailure("bad-answer", f"{len(scores)} scores for {len(documents)} documents")
    except RankerFailure as failure:
        return _fell_back(rankers, chosen, len(documents), failure.reason)
    except Exception:
        # A third-party ranker's bug must not fail the client's request; it is logged with its traceback.
        log.exception("ranker %s raised", chosen)
        return _fell_back(rankers, chosen, len(documents), "error")
    if rankers.observe is not None:
        rankers.observe(chosen, "ok")
    return Ranking(scores, chosen, bounded=ranker.bounded)


def client_order(count: int) -> list[float]:
    """Scores that rank `count` documents in the order the client sent them."""
    return [float(count - i) for i in range(count)]


def _fell_back(rankers: RankerSet, name: str, count: int, reason: str) -> Ranking:
    if rankers.observe is not None:
        rankers.observe(name, reason)
    return Ranking(client_order(count), name, reason)

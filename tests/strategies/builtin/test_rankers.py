"""Rankers as steps use them: `client` keeps the sender's order (and with `edges-last` places documents exactly
as LangChain's and LlamaIndex's LongContextReorder do), `lexical` ranks by BM25, `fusion` by reciprocal rank,
and a ranker that fails or answers nonsense never fails the request: the client's order stays and the step says
which ranker fell back and why."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import pytest

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.rankers import Ranker, RankerFailure, RankerSet, published_rankers, rank_documents
from contextlift.strategies.rankers.fusion import RRF_K, Fusion
from contextlift.strategies.rankers.lexical import bm25_scores
from contextlift.strategies.request import Document
from contextlift.strategies.selection import StrategySelectionError
from tests.fakes import FakeEmbedder
from tests.strategies.builtin.test_reorder_edges import litm
from tests.strategies.scripted import ScriptedUpstream

HARD = [
    "Ravel Oduya founded the Kestrel Guild in the harbour town of Venn.",
    "Ravel Oduya was born in the mountain village of Osk, far from the sea.",
    "The Kestrel Guild's first ship was called the Longwater, built by Ravel Oduya's crew.",
    "Ravel Oduya's favourite instrument was the bone flute, which Ravel Oduya played at Osk.",
]
"""Four passages about one invented person; only the second says where he was born."""


def docs(texts: Sequence[str]) -> list[Document]:
    return [Document(text=t) for t in texts]


def rankers(**extra: Ranker) -> RankerSet:
    return RankerSet({**published_rankers(), **extra}, embedder=FakeEmbedder())


async def placed(selection: str, texts: Sequence[str], question: str, services: Services) -> tuple[list[str], str]:
    upstream = ScriptedUpstream("ok")
    registry = build_registry()
    registry.rankers = frozenset(services.ranker_set().rankers)
    pipeline = registry.resolve(parse_selection(selection), {})
    result = await run_pipeline(pipeline, parse_request(litm(list(texts), question)), upstream, services)
    lines = [line for line in upstream.prompts[0].splitlines() if line.startswith("Document")]
    return [line.split(") ", 1)[1] for line in lines], result.applied


async def test_client_keeps_the_senders_ranking() -> None:
    ranking = await rank_documents("q", docs(["a", "b", "c"]), rankers(), "client")
    assert (ranking.order(), ranking.fallback) == ([0, 1, 2], None)


@pytest.mark.parametrize("count", range(1, 10))
async def test_client_edges_last_is_langchains_and_llamaindexs_long_context_reorder(count: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community announces its sunset on import
        from langchain_community.document_transformers import LongContextReorder
    from langchain_core.documents import Document as LangChainDocument
    from llama_index.core.postprocessor import LongContextReorder as LlamaIndexReorder
    from llama_index.core.schema import NodeWithScore, TextNode

    texts = [f"passage number {i}" for i in range(count)]  # the retriever's order, most relevant first
    ours, applied = await placed("reorder; ranker=client; order=edges-last", texts, "q", Services())
    langchain = [
        d.page_content for d in LongContextReorder().transform_documents([LangChainDocument(t) for t in texts])
    ]
    nodes = [NodeWithScore(node=TextNode(text=t), score=1.0 - i / count) for i, t in enumerate(texts)]
    llamaindex = [n.node.get_content() for n in LlamaIndexReorder().postprocess_nodes(nodes)]
    assert ours == langchain == llamaindex
    assert applied == "reorder; ranker=client; order=edges-last"


def test_bm25_finds_the_passage_with_the_questions_rare_words() -> None:
    scores = bm25_scores("Where was Ravel Oduya born?", HARD)
    assert max(range(len(HARD)), key=scores.__getitem__) == 1
    assert bm25_scores("zzz qqq", HARD) == [0.0] * 4  # no shared word: no signal, the client's order stays


def test_bm25_over_documents_without_an_indexable_word_is_no_signal_not_an_error() -> None:
    # One-character tokens, digits and stop words alone: bm25s's index has no vocabulary (the quick profile's
    # arithmetic task sends such documents; the ranker raised there and logged a traceback per request).
    assert bm25_scores("What is x?", ["x = 4", "y = 7 + 2", "and the", ""]) == [0.0] * 4


async def test_lexical_through_reorder_promotes_the_answer() -> None:
    order, applied = await placed("reorder; ranker=lexical", HARD, "Where was Ravel Oduya born?", Services())
    assert order[0] == HARD[1]
    assert applied == "reorder; ranker=lexical"


async def test_fusion_sums_reciprocal_ranks_in_member_order() -> None:
    class Fixed(Ranker):
        def __init__(self, scores: list[float]) -> None:
            self.fixed = scores

        async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> list[float]:
            return self.fixed

    fused = Fusion(("one", "two"))
    scores = await fused.scores("q", docs("abc"), rankers(one=Fixed([3, 2, 1]), two=Fixed([1, 3, 2])))
    assert scores == pytest.approx(
        [1 / (RRF_K + 1) + 1 / (RRF_K + 3), 1 / (RRF_K + 2) + 1 / (RRF_K + 1), 1 / (RRF_K + 3) + 1 / (RRF_K + 2)]
    )


class Broken(Ranker):
    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def scores(self, question: str, documents: Sequence[Document], rankers: RankerSet) -> list[float]:
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (RankerFailure("timeout"), "timeout"),
        ([1.0, 2.0], "bad-answer"),  # two scores for five documents
        ([1.0, math.nan, 0.0, 0.0, 0.0], "bad-answer"),
        ([1.0, math.inf, 0.0, 0.0, 0.0], "bad-answer"),
        (ZeroDivisionError("a plugin's bug"), "error"),
    ],
)
async def test_a_failing_ranker_keeps_the_clients_order_and_says_why(answer: object, reason: str) -> None:
    observed: list[tuple[str, str]] = []
    services = Services(
        rankers=RankerSet({**published_rankers(), "flaky": Broken(answer)}, observe=lambda *pair: observed.append(pair))
    )
    texts = ["v", "w", "x", "y", "z"]
    order, applied = await placed("reorder; ranker=flaky; order=descending", texts, "q", services)
    assert order == texts
    assert applied == f"reorder; ranker=flaky; order=descending; ranker-fallback=flaky:{reason}"
    assert observed == [("flaky", reason)]


async def test_filter_keeps_every_document_when_its_ranker_falls_back() -> None:
    services = Services(rankers=RankerSet({**published_rankers(), "down": Broken(RankerFailure("unreachable"))}))
    order, applied = await placed("filter; ranker=down; top=1", ["a b", "c d", "e f"], "q", services)
    assert order == ["a b", "c d", "e f"]
    assert applied == "filter; ranker=down; top=1; ranker-fallback=down:unreachable"


async def test_filter_reads_an_unbounded_rankers_scores_rescaled() -> None:
    # BM25 scores have no fixed scale: rescaled, only the passages within 0.2 of the best (1.0) stay.
    question = "Where was Ravel Oduya born in Osk?"
    order, applied = await placed("filter; ranker=lexical; margin=0.2", HARD, question, Services())
    assert HARD[1] in order
    assert len(order) < len(HARD)
    assert applied.startswith("filter; ranker=lexical; margin=0.2; dropped=")
    # Measured, BM25 alone drops an answer-bearing chunk too often: by default every document stays, unremarked.
    order, applied = await placed("filter; ranker=lexical", HARD, question, Services())
    assert (order, applied) == (HARD, "filter; ranker=lexical")


async def test_a_margin_the_request_set_or_a_ranker_it_was_measured_with_says_nothing_more() -> None:
    question = "Where was Ravel Oduya born in Osk?"
    _, applied = await placed("filter; ranker=lexical; margin=0.5", HARD, question, Services())
    assert "unmeasured-with" not in applied
    services = Services(embedder=FakeEmbedder())
    _, applied = await placed("filter; ranker=minilm", HARD, question, services)
    assert "unmeasured-with" not in applied


def test_an_unknown_ranker_is_refused_when_the_selection_resolves() -> None:
    registry = build_registry()
    with pytest.raises(StrategySelectionError, match="unknown ranker 'nope'; known rankers: client, fusion"):
        registry.resolve(parse_selection("reorder; ranker=nope"), {})
    with pytest.raises(StrategySelectionError, match="has no parameter 'ranker'"):
        registry.resolve(parse_selection("recite; ranker=lexical"), {})
    registry.rankers = frozenset({"client", "tei"})
    assert registry.resolve(parse_selection("reorder; ranker=tei"), {}).steps[0].params["ranker"] == "tei"


def test_only_rankers_that_embed_make_a_pipeline_wait_for_the_embedder() -> None:
    registry, set_ = build_registry(), RankerSet(published_rankers())
    waits = {
        text: registry.resolve(parse_selection(text), {}).waits_for_embedder(set_)
        for text in (
            "reorder",
            "reorder; ranker=minilm",
            "reorder; ranker=client",
            "filter; ranker=lexical",
            "reorder; ranker=fusion",
            "medoid",
        )
    }
    assert waits == {
        "reorder": False,  # the default ranker, lexical
        "reorder; ranker=minilm": True,
        "reorder; ranker=client": False,
        "filter; ranker=lexical": False,
        "reorder; ranker=fusion": True,
        "medoid": True,
    }

"""`reorder`: the order each mode produces for 1 to 7 documents, the ranking by relevance, and the budget."""

from __future__ import annotations

import pytest

from contextlift.strategies import Services, build_registry, parse_request, parse_selection, run_pipeline
from contextlift.strategies.builtin.reorder import arrange
from tests.fakes import FakeEmbedder
from tests.strategies.scripted import ScriptedUpstream

EXPECTED = {
    "edges-first": {
        1: [1], 2: [1, 2], 3: [1, 3, 2], 4: [1, 3, 4, 2], 5: [1, 3, 5, 4, 2],
        6: [1, 3, 5, 6, 4, 2], 7: [1, 3, 5, 7, 6, 4, 2],
    },
    # LangChain's LongContextReorder on documents ranked 1..n (best first).
    "edges-last": {
        1: [1], 2: [2, 1], 3: [1, 3, 2], 4: [2, 4, 3, 1], 5: [1, 3, 5, 4, 2],
        6: [2, 4, 6, 5, 3, 1], 7: [1, 3, 5, 7, 6, 4, 2],
    },
    "descending": {n: list(range(1, n + 1)) for n in range(1, 8)},
}  # fmt: skip


@pytest.mark.parametrize("order", sorted(EXPECTED))
@pytest.mark.parametrize("count", range(1, 8))
def test_each_mode_places_ranks_as_documented(order: str, count: int) -> None:
    assert arrange(list(range(1, count + 1)), order) == EXPECTED[order][count]


def litm(documents: list[str], question: str) -> dict[str, object]:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {d}" for i, d in enumerate(documents, 1))
    return {
        "model": "m",
        "messages": [{"role": "user", "content": f"Answer.\n\n{lines}\n\nQuestion: {question}\nAnswer:"}],
    }


DOCS = ["cats purr softly", "dogs bark loudly", "the moon orbits earth", "cats and dogs play", "rivers flow"]


async def run(selection: str, body: dict[str, object]) -> tuple[ScriptedUpstream, str]:
    upstream = ScriptedUpstream("ok")
    pipeline = build_registry().resolve(parse_selection(selection), {})
    result = await run_pipeline(pipeline, parse_request(body), upstream, Services(embedder=FakeEmbedder()))
    return upstream, result.applied


async def test_most_relevant_documents_go_to_the_edges() -> None:
    upstream, applied = await run("reorder; order=edges-first", litm(DOCS, "do cats purr"))
    assert applied == "reorder; order=edges-first"
    # By the fake embedder: "cats purr softly" best, then "cats and dogs play", then the rest in client order.
    assert upstream.prompts[0] == (
        "Answer.\n\n"
        "Document [1](Title: T1) cats purr softly\n"
        "Document [2](Title: T2) dogs bark loudly\n"
        "Document [3](Title: T5) rivers flow\n"
        "Document [4](Title: T3) the moon orbits earth\n"
        "Document [5](Title: T4) cats and dogs play\n\n"
        "Question: do cats purr\nAnswer:"
    )


async def test_budget_drops_the_least_relevant_documents() -> None:
    upstream, applied = await run("reorder; order=descending; budget=40", litm(DOCS, "do cats purr"))
    prompt = upstream.prompts[0]
    assert applied == "reorder; order=descending; budget=40; dropped=2"
    assert prompt.count("Document [") == 3
    assert "T1) cats purr softly" in prompt.splitlines()[2]


async def test_request_without_documents_is_untouched() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    upstream, applied = await run("reorder", body)
    assert applied == "none"
    assert upstream.bodies == [body]

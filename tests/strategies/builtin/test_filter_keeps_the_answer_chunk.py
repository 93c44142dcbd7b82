"""`filter` keeps the chunk that holds the answer (issue #51): a LangChain prompt of four multi-paragraph chunks
joined by `---`, asking for the highest mountain in the Alps, where BM25 (the default ranker) puts the Matterhorn's
chunk first. The old default, a margin of 0.2 on BM25's rescaled scores, dropped the other three, Mont Blanc's
among them; measured (docs/results/filter-margins), no BM25 cut keeps the answer often enough, so by default
`filter` with `lexical` keeps every document."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes import FakeUpstream

QUESTION = "What is the highest mountain in the Alps?"
ALPS = """The Alps are the most extensive mountain range entirely in Europe. They stretch about 1,200 km across \
eight countries, from France and Monaco in the west through Switzerland, Italy, Liechtenstein, Germany and Austria \
to Slovenia in the east.

The range was lifted up over tens of millions of years as the African and Eurasian plates collided. Glaciers later \
carved its valleys, and about 128 of its peaks rise above 4,000 m.

The Matterhorn, on the border between Switzerland and Italy, is the most famous mountain of the Alps. Its \
near-symmetric pyramid of 4,478 m is one of the highest summits in the Alps and among the deadliest mountains to \
climb.

It was first climbed in 1865 by Edward Whymper's party; four of the seven climbers died on the descent. Today the \
Hornli ridge above Zermatt is the usual route to its summit.

Mont Blanc, on the French-Italian border, rises 4,806 m above sea level. It is the highest summit of Western \
Europe, and its height is remeasured every two years because the ice cap on top shifts.

The town of Chamonix lies at its foot, and the Mont Blanc Tunnel, opened in 1965, carries road traffic between \
France and Italy beneath the massif.

Tourism is the main industry of many Alpine valleys. Ski resorts such as Zermatt, St. Moritz and Val d'Isere draw \
millions of visitors in winter, and hikers walk the high trails in summer.

Farming in the Alps has long depended on transhumance: cattle spend the summer on high pastures and come down to \
the valleys for the winter."""
ANSWER = "Mont Blanc, on the French-Italian border, rises 4,806 m above sea level."
ROLES = {"system": "system", "human": "user"}


def retrieved_chunks() -> list[str]:
    """The article cut as LangChain's splitter cuts it, two paragraphs a chunk, in a retriever's order: the
    Matterhorn's chunk first, then the range's, Mont Blanc's and the valleys'."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    chunks = RecursiveCharacterTextSplitter(chunk_size=450, chunk_overlap=0).split_text(ALPS)
    assert len(chunks) == 4
    assert all("\n\n" in c for c in chunks), "each chunk holds two paragraphs"
    return [chunks[1], chunks[0], chunks[2], chunks[3]]


def langchain_body() -> dict[str, Any]:
    """The body LangChain's stuff chain sends (load_qa_chain's chat prompt), the chunks joined by `---`."""
    from langchain_classic.chains.question_answering.stuff_prompt import CHAT_PROMPT

    messages = CHAT_PROMPT.format_messages(context="\n\n---\n\n".join(retrieved_chunks()), question=QUESTION)
    return {"model": "m", "messages": [{"role": ROLES[m.type], "content": m.content} for m in messages]}


def post(client: Any, strategy: str) -> Any:
    headers = {"x-context-strategy": strategy, "x-context-debug": "scores"}
    return client.post("/v1/chat/completions", json=langchain_body(), headers=headers)


def context_sent(fake: FakeUpstream) -> str:
    return str(json.loads(fake.requests[-1].content)["messages"][0]["content"])


def test_bm25_ranks_the_matterhorns_chunk_first(client: Any) -> None:
    response = post(client, "filter; margin=0.2")
    best = response.headers["x-context-scores"].split(": ", 1)[1].split(", ")[0]
    assert best.startswith("1="), "the Matterhorn's chunk, sent first, scores highest"


def test_the_old_margin_drops_the_chunk_that_holds_the_answer(client: Any, fake: FakeUpstream) -> None:
    response = post(client, "filter; margin=0.2")
    assert response.headers["x-context-strategy"] == "filter; margin=0.2; dropped=3"
    assert ANSWER not in context_sent(fake)
    assert "The Matterhorn" in context_sent(fake)


def test_the_default_keeps_the_chunk_that_holds_the_answer(client: Any, fake: FakeUpstream) -> None:
    response = post(client, "filter")
    assert response.status_code == 200
    # Measured with lexical, the default ranker: nothing dropped, and nothing unmeasured to say.
    assert response.headers["x-context-strategy"] == "filter"
    assert response.headers["x-context-scores"].startswith("filter; ranker=lexical")
    assert ANSWER in context_sent(fake)
    assert all(chunk in context_sent(fake) for chunk in retrieved_chunks())

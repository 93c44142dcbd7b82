"""The response says where the client's documents went: `X-Context-Order` lists the client's document numbers in
the order sent upstream (or `kept` where nothing moved), `X-Context-Dropped` the ones left out; both bounded."""

from __future__ import annotations

import json
from typing import Any

from contextlift.proxy.request_log import MAX_ORDER_NUMBERS
from tests.fakes import FakeUpstream
from tests.serving import chat

TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars.", "Delta lies at the mouth."]


def litm(texts: list[str], question: str) -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(texts, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: {question}\nAnswer:"


def post(client: Any, content: str, strategy: str) -> Any:
    return client.post("/v1/chat/completions", json=chat(content), headers={"x-context-strategy": strategy})


def sent_order(fake: FakeUpstream, texts: list[str]) -> list[int]:
    """The client's numbers of the documents in the body the upstream received, in its order."""
    content = json.loads(fake.requests[-1].content)["messages"][0]["content"]
    where = {content.find(t): n for n, t in enumerate(texts, 1) if t in content}
    return [where[at] for at in sorted(where)]


def test_a_move_is_told_as_the_client_numbers_in_the_order_sent(client: Any, fake: FakeUpstream) -> None:
    response = post(client, litm(TEXTS, "Where do gamma rays come from?"), "reorder; order=descending; ranker=lexical")
    order = [int(n) for n in response.headers["x-context-order"].split(",")]
    assert order == sent_order(fake, TEXTS)
    assert order[0] == 3
    assert "x-context-dropped" not in response.headers


def test_an_order_that_moves_nothing_says_kept(client: Any, fake: FakeUpstream) -> None:
    # The client ranker keeps the client's order: promote then moves nothing, and the header says so.
    response = post(client, litm(TEXTS, "Where do gamma rays come from?"), "reorder; ranker=client")
    assert response.headers["x-context-order"] == "kept"
    assert sent_order(fake, TEXTS) == [1, 2, 3, 4]


def test_dropped_documents_are_named(client: Any, fake: FakeUpstream) -> None:
    response = post(client, litm(TEXTS, "Where do gamma rays come from?"), "reorder; ranker=lexical; budget=12")
    dropped = [int(n) for n in response.headers["x-context-dropped"].split(",")]
    sent = sent_order(fake, TEXTS)
    assert sorted(sent + dropped) == [1, 2, 3, 4]
    assert [int(n) for n in response.headers["x-context-order"].split(",")] == sent


def test_no_order_is_told_where_nothing_was_read(client: Any, fake: FakeUpstream) -> None:
    assert "x-context-order" not in post(client, "Tell me a joke.", "reorder").headers
    assert "x-context-order" not in post(client, litm(TEXTS, "Which?"), "none").headers


def test_a_long_order_is_cut_with_a_count(client: Any, fake: FakeUpstream) -> None:
    texts = [f"Fact number {i} about topic {i}." for i in range(1, 201)]
    response = post(client, litm(texts, "What about topic 200?"), "reorder; order=descending; ranker=lexical")
    shown, _, hidden = response.headers["x-context-order"].rpartition(",...+")
    assert len(shown.split(",")) == MAX_ORDER_NUMBERS
    assert int(hidden) == 200 - MAX_ORDER_NUMBERS
    assert shown.split(",")[0] == "200"
    assert len(response.headers["x-context-order"]) < 400

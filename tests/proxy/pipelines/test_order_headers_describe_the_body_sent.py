"""`X-Context-Order` and `X-Context-Dropped` describe the bodies the upstream received, for every built-in strategy
and the pipelines that combine them: a document the headers call sent is in a body, one they call dropped is in
none, and a body holding the whole context holds it in the order the headers give (`repeat` sends it twice, in
that order both times; `medoid` says `permuted`, its calls each having an order of their own)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextlift.strategies import build_registry
from tests.fakes import FakeUpstream
from tests.serving import chat

TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars."]
QUESTION = "Where do gamma rays come from?"
SELECTIONS = {
    "reorder": "reorder; ranker=lexical",
    "filter": "filter; ranker=lexical; top=2",
    "focus": "focus; ranker=lexical",
    "medoid": "medoid; k=3; seed=7",
}
"""A step as the cases select it where its defaults would say less (a filter that keeps all, a random draw)."""
PIPELINES = [
    "reorder; ranker=lexical, repeat",
    "filter; ranker=lexical; top=2, repeat",
    "query-aware, repeat",
    "focus; ranker=lexical, repeat",
    "reorder; ranker=lexical, focus; ranker=lexical, repeat",
    "reorder; ranker=lexical, medoid; k=3; seed=7",
    "reorder; ranker=lexical, medoid; k=3; permute=off",
    "filter; ranker=lexical; top=2, recite",
    "reorder; ranker=lexical; order=descending, fact",
    "reorder; ranker=lexical, chain",
    "reorder; ranker=lexical, excerpt; ranker=lexical",
    "filter; ranker=lexical; top=2, excerpt; ranker=lexical",
    "excerpt; ranker=lexical, repeat",
]


def litm() -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(TEXTS, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: {QUESTION}\nAnswer:"


def order_in(body: dict[str, Any]) -> list[int]:
    """The client's numbers of the documents in one body the upstream received, in the order they first appear."""
    text = "\n".join(str(m.get("content")) for m in body.get("messages", []))
    where = {text.find(t): n for n, t in enumerate(TEXTS, 1) if t in text}
    return [where[at] for at in sorted(where)]


def numbers(value: str | None) -> list[int]:
    return [int(n) for n in value.split(",")] if value else []


def every_selection() -> list[str]:
    return [SELECTIONS.get(name, name) for name in build_registry().names()] + PIPELINES


@pytest.mark.parametrize("selection", every_selection())
def test_the_order_headers_are_those_of_the_bodies_sent(client: Any, fake: FakeUpstream, selection: str) -> None:
    response = client.post("/v1/chat/completions", json=chat(litm()), headers={"x-context-strategy": selection})
    assert response.status_code == 200, response.text
    bodies = [json.loads(r.content) for r in fake.requests]
    if selection == "none":  # reads no documents, so says nothing of them
        assert "x-context-order" not in response.headers
        return
    told = response.headers["x-context-order"]
    dropped = numbers(response.headers.get("x-context-dropped"))
    sent = [n for n in range(1, len(TEXTS) + 1) if n not in dropped] if told in ("kept", "permuted") else numbers(told)
    assert sorted(sent + dropped) == [1, 2, 3]
    assert set().union(*(order_in(b) for b in bodies)) == set(sent), (told, [order_in(b) for b in bodies])
    whole = [order_in(b) for b in bodies if set(order_in(b)) == set(sent)]
    assert whole, "no body held the whole context"
    if told == "permuted":
        assert len({tuple(o) for o in whole}) > 1
    else:
        assert all(order == sent for order in whole), (told, whole)


def test_reorder_then_repeat_tells_the_move_and_drops_nothing(client: Any, fake: FakeUpstream) -> None:
    headers = {"x-context-strategy": "reorder; ranker=lexical, repeat"}
    response = client.post("/v1/chat/completions", json=chat(litm()), headers=headers)
    assert response.headers["x-context-order"] == "3,1,2"
    assert "x-context-dropped" not in response.headers
    content = json.loads(fake.requests[-1].content)["messages"][0]["content"]
    assert all(content.count(text) == 2 for text in TEXTS)

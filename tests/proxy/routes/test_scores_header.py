"""`X-Context-Debug: scores` shows each ranked step's ranking in `X-Context-Scores`: the client's document numbers best
first with their scores, the ranker and its margin; off by default, bounded, and never sent upstream."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes import FakeUpstream
from tests.serving import chat

ALPS = [
    "The Matterhorn is a mountain of the Alps, on the border of Switzerland and Italy.",
    "Mont Blanc is the highest mountain in the Alps, at 4,805 m.",
    "The Eiger is in the Bernese Alps.",
]
QUESTION = "What is the highest mountain in the Alps?"


def body(count: int = 3) -> dict[str, Any]:
    chunks = ALPS + [f"Filler passage number {i} about valleys." for i in range(count - len(ALPS))]
    return chat("\n".join(f"<doc>{c}</doc>" for c in chunks) + f"\n\nQuestion: {QUESTION}")


def post(client: Any, sent: dict[str, Any], strategy: str, debug: str | None = "scores") -> Any:
    headers = {"x-context-strategy": strategy, **({"x-context-debug": debug} if debug else {})}
    return client.post("/v1/chat/completions", json=sent, headers=headers)


def test_each_ranked_step_shows_its_ranking(client: Any, fake: FakeUpstream) -> None:
    response = post(client, body(), "filter; ranker=lexical; margin=1, reorder; ranker=lexical; order=descending")
    assert response.status_code == 200
    scores = response.headers["x-context-scores"]
    first, second = scores.split(" | ")
    assert first.startswith("filter; ranker=lexical; margin=")
    assert second.startswith("reorder; ranker=lexical; margin=")
    assert first.split(": ", 1)[1].split(", ")[0].startswith("2="), "Mont Blanc's chunk ranks first"
    assert "x-context-debug" not in {k.lower() for k in fake.requests[-1].headers}


@pytest.mark.parametrize("debug", [None, "timings"])
def test_off_unless_asked(client: Any, debug: str | None) -> None:
    response = post(client, body(), "reorder; ranker=lexical", debug)
    assert "x-context-scores" not in response.headers


def test_a_pipeline_that_ranks_nothing_says_none(client: Any) -> None:
    assert post(client, body(), "repeat").headers["x-context-scores"] == "none"


def test_many_documents_are_listed_up_to_the_bound(client: Any, fake: FakeUpstream) -> None:
    response = post(client, body(60), "reorder; ranker=lexical")
    scores = response.headers["x-context-scores"]
    entries = scores.split(": ", 1)[1].split(", ")
    assert entries[-1] == "...+28"
    assert len(entries) == 33
    assert len(scores) < 4096
    assert json.loads(fake.requests[-1].content)["messages"]


def test_excerpt_on_a_context_it_may_not_move_shows_its_ranking_of_the_contexts_units(
    client: Any, fake: FakeUpstream
) -> None:
    # LangChain's default join: blank lines alone, so the units are read (for excerpt) but never moved.
    sent = chat(
        "Answer the question based only on the following context:\n" + "\n\n".join(ALPS) + f"\n\nQuestion: {QUESTION}"
    )
    response = post(client, sent, "excerpt; ranker=lexical")
    assert response.headers["x-context-format"] == "none: ambiguous-chunks"
    assert "; quoted_paragraph=" in response.headers["x-context-strategy"]
    head, entries = response.headers["x-context-scores"].split(": ", 1)
    assert head.startswith("excerpt; ranker=lexical; margin=")
    names = [entry.split("=")[0] for entry in entries.split(", ")]
    assert names[0] == "unit2", "Mont Blanc's paragraph ranks first"
    assert sorted(names) == ["unit1", "unit2", "unit3"]

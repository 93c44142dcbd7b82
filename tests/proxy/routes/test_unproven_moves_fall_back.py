"""`reorder` and `filter` move only what the request proves. Where the context's boundaries are a guess (chunks joined
by blank lines alone, or marked-up chunks joined by a rule they may hold themselves), the operator's
`unproven_fallback` runs in the move's place and the header says so: by default `excerpt`, which quotes one passage
before the question; with `none`, nothing runs and the body goes upstream byte for byte."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from contextlift.proxy.settings import SettingsError
from tests.fakes import FakeUpstream
from tests.serving import chat

QUESTION = "Where do gamma rays come from?"
PLAIN = ["Alpha grows in spring.\n\nIt is green.", "Beta is a river.", "Gamma rays come from stars.", "Delta."]
MARKED_UP = ["## Alpha\n\nAlpha grows in spring.", "Beta is a river.", "Gamma rays come from stars.", "Delta."]


def prompt(chunks: list[str], join: str) -> str:
    return f"Answer the question based only on the following context:\n{join.join(chunks)}\n\nQuestion: {QUESTION}"


def post(client: Any, body: dict[str, Any], strategy: str) -> Any:
    return client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": strategy})


def sent(fake: FakeUpstream) -> dict[str, Any]:
    return json.loads(fake.requests[-1].content)  # type: ignore[no-any-return]


CASES = [
    (PLAIN, "\n\n", "ambiguous-chunks"),
    (MARKED_UP, "\n\n---\n\n", "unproven-boundaries"),
]


@pytest.mark.parametrize(("chunks", "join", "reason"), CASES, ids=["blank-lines", "marked-up-dashes"])
@pytest.mark.parametrize("move", ["reorder; ranker=lexical", "filter; ranker=lexical"])
def test_a_move_on_a_guessed_reading_is_declined_and_says_why(
    make_client: Any, fake: FakeUpstream, chunks: list[str], join: str, reason: str, move: str
) -> None:
    client = make_client(unproven_fallback="none")
    body = chat(prompt(chunks, join))
    response = post(client, body, move)
    assert response.status_code == 200
    assert sent(fake) == body
    assert response.headers["x-context-strategy"] == f"{move} -> none: {reason}"
    assert response.headers["x-context-format"] == f"none: {reason}"


@pytest.mark.parametrize(("chunks", "join", "reason"), CASES, ids=["blank-lines", "marked-up-dashes"])
@pytest.mark.parametrize(("fallback", "note"), [("focus", "focused_"), ("excerpt", "quoted_"), (None, "quoted_")])
def test_the_operators_fallback_adds_beside_the_context_and_moves_nothing(
    make_client: Any, fake: FakeUpstream, chunks: list[str], join: str, reason: str, fallback: str | None, note: str
) -> None:
    # None: the default, which is excerpt.
    client = make_client(unproven_fallback=fallback) if fallback else make_client()
    fallback = fallback or "excerpt"
    original = prompt(chunks, join)
    response = post(client, chat(original), "reorder; ranker=lexical")
    assert response.status_code == 200
    strategy = response.headers["x-context-strategy"]
    assert strategy.startswith(f"reorder; ranker=lexical -> {fallback}: {reason}; {note}")
    content = sent(fake)["messages"][0]["content"]
    context, _, _ = original.partition("\n\nQuestion:")
    assert content.startswith(context)
    assert len(content) > len(original)
    # Nothing moved or dropped: the order headers, which speak of documents the request proves, say nothing.
    assert "x-context-order" not in response.headers
    assert "x-context-dropped" not in response.headers
    assert "Gamma rays come from stars." in content[len(context) :]


def test_a_proven_reading_is_moved_as_asked(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(unproven_fallback="focus")
    chunks = [f"<doc>{c}</doc>" for c in PLAIN]
    response = post(client, chat(prompt(chunks, "\n")), "reorder; ranker=lexical; order=descending")
    assert response.headers["x-context-strategy"] == "reorder; ranker=lexical; order=descending"
    content = sent(fake)["messages"][0]["content"]
    assert content.index("Gamma rays") < content.index("Alpha grows")


@pytest.mark.parametrize("fallback", ["reorder", "excerpt, focus", "no-such-step", "excerpt; top=9"])
def test_a_fallback_that_is_not_one_step_that_adds_is_refused_at_start_up(make_client: Any, fallback: str) -> None:
    with pytest.raises(SettingsError, match="unproven_fallback"):
        make_client(unproven_fallback=fallback)


def test_the_fallback_is_bound_by_the_caps_and_takes_parameters(make_client: Any, fake: FakeUpstream) -> None:
    long_gamma = "Gamma rays come from stars, " + "and from the hot gas around black holes, " * 12 + "mostly."
    original = prompt([*MARKED_UP[:2], long_gamma, MARKED_UP[3]], "\n\n---\n\n")
    added = {}
    for fallback, caps in (("excerpt", {}), ("excerpt", {"excerpt.max_tokens": 16}), ("excerpt; max_tokens=16", {})):
        client = make_client(unproven_fallback=fallback, strategy_caps=caps)
        header = post(client, chat(original), "reorder; ranker=lexical").headers["x-context-strategy"]
        added[(fallback, bool(caps))] = int(header.rsplit("tokens=+", 1)[1])
    assert added[("excerpt", True)] < added[("excerpt", False)]
    assert added[("excerpt; max_tokens=16", False)] == added[("excerpt", True)]


def test_the_fallback_runs_once_and_a_later_move_says_it_moved_nothing(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(unproven_fallback="excerpt")
    original = prompt(MARKED_UP, "\n\n---\n\n")
    response = post(client, chat(original), "reorder; ranker=lexical, filter; ranker=lexical")
    steps = response.headers["x-context-strategy"].split(", ")
    assert steps[0].startswith("reorder; ranker=lexical -> excerpt: unproven-boundaries; quoted_chunk=")
    assert steps[1] == "filter; ranker=lexical -> none: unproven-boundaries"
    assert sent(fake)["messages"][0]["content"].count("Relevant excerpt") == 1


@pytest.mark.parametrize("selection", ["focus; ranker=lexical, excerpt; ranker=lexical", "reorder, focus"])
def test_steps_that_add_beside_a_guessed_reading_each_keep_what_the_other_added(
    make_client: Any, fake: FakeUpstream, selection: str
) -> None:
    client = make_client(unproven_fallback="excerpt")
    original = prompt(MARKED_UP, "\n\n---\n\n")
    response = post(client, chat(original), selection)
    content = sent(fake)["messages"][0]["content"]
    assert content.count("Relevant excerpt") == 1
    assert content.count("The most relevant document for the question is") == 1
    assert len(response.headers["x-context-strategy"].split(", ")) == 2


def test_a_failed_request_names_the_fallback_that_rewrote_its_body(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(unproven_fallback="focus", max_retries=0)
    fake.queue(httpx.ConnectError("connection refused by fake"))
    response = post(client, chat(prompt(MARKED_UP, "\n\n---\n\n")), "reorder; ranker=lexical")
    assert response.status_code == 502
    assert response.headers["x-context-strategy"].startswith("reorder; ranker=lexical -> focus: unproven-boundaries")
    assert "The most relevant document for the question is" in sent(fake)["messages"][0]["content"]


def test_a_declined_move_sends_the_clients_bytes_as_they_came(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(unproven_fallback="none")
    # Odd spacing and escapes that a re-serialisation would change: the upstream must get these very bytes.
    body = chat(prompt(MARKED_UP, "\n\n---\n\n") + " \u00e9")
    raw = json.dumps(body, indent=3, ensure_ascii=True).encode()
    response = client.post(
        "/v1/chat/completions",
        content=raw,
        headers={"x-context-strategy": "reorder; ranker=lexical", "content-type": "application/json"},
    )
    assert response.headers["x-context-strategy"] == "reorder; ranker=lexical -> none: unproven-boundaries"
    assert fake.requests[-1].content == raw


def test_a_pipeline_that_asks_for_the_fallbacks_step_gets_it_once(client: Any, fake: FakeUpstream) -> None:
    # The default fallback is excerpt: `reorder, excerpt` on a guessed reading quotes once, where excerpt was asked.
    original = prompt(PLAIN, "\n\n")
    response = post(client, chat(original), "reorder; ranker=lexical, excerpt; ranker=lexical")
    steps = response.headers["x-context-strategy"].split(", ")
    assert steps[0] == "reorder; ranker=lexical -> none: ambiguous-chunks"
    assert steps[1].startswith("excerpt; ranker=lexical; quoted_paragraph=")
    assert sent(fake)["messages"][0]["content"].count("Relevant excerpt") == 1

"""`focus` adds one sentence naming the most relevant document as the client labelled it and keeps every byte of the
context; it also names a passage where blank lines alone separate the context (nothing there may move). `repeat`
sends the user's last turn twice, says what it added, and leaves tools, images and over-long prompts alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes import FakeUpstream
from tests.serving import chat

QUESTION = "Where do gamma rays come from?"
TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars.", "Delta lies at the mouth."]


def post(client: Any, body: dict[str, Any], strategy: str) -> Any:
    return client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": strategy})


def sent(fake: FakeUpstream) -> dict[str, Any]:
    return json.loads(fake.requests[-1].content)  # type: ignore[no-any-return]


def litm() -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(TEXTS, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: {QUESTION}\nAnswer:"


def test_focus_names_the_paper_format_document_by_its_index(client: Any, fake: FakeUpstream) -> None:
    original = litm()
    response = post(client, chat(original), "focus; ranker=lexical")
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "focus; ranker=lexical; focused=3"
    content = sent(fake)["messages"][0]["content"]
    sentence = "\n\nThe most relevant document for the question is Document [3]."
    head, _, tail = original.partition("\n\nQuestion:")
    assert content == f"{head}{sentence}\n\nQuestion:{tail}"
    assert response.headers["x-context-order"] == "kept"


@pytest.mark.parametrize(
    ("join", "label"),
    [
        ("\n\n---\n\n", 'the one that begins "Gamma rays come from stars."'),
        ("\n\n", 'the one that begins "Gamma rays come from stars."'),
    ],
    ids=["separated", "blank-lines-only"],
)
def test_focus_quotes_an_unlabelled_chunk_and_keeps_the_context_byte_for_byte(
    client: Any, fake: FakeUpstream, join: str, label: str
) -> None:
    context = join.join(TEXTS)
    prompt = f"Answer the question based only on the following context:\n{context}\n\nQuestion: {QUESTION}"
    response = post(client, chat(prompt), "focus; ranker=lexical")
    content = sent(fake)["messages"][0]["content"]
    assert content == (
        f"Answer the question based only on the following context:\n{context}"
        f"\n\nThe most relevant document for the question is {label}.\n\nQuestion: {QUESTION}"
    )
    if join == "\n\n":
        assert response.headers["x-context-format"] == "none: ambiguous-chunks"
        assert "x-context-order" not in response.headers


def test_focus_after_filter_names_a_kept_document_and_numbered_sources_by_their_marker(
    client: Any, fake: FakeUpstream
) -> None:
    sources = "\n".join(f"[{i}] {t}" for i, t in enumerate(TEXTS, 1))
    response = post(
        client, chat(f"{sources}\n\nQuestion: {QUESTION}"), "filter; ranker=lexical; top=2; margin=1, focus; top=2"
    )
    assert response.status_code == 200
    content = sent(fake)["messages"][0]["content"]
    assert "[3] Gamma rays come from stars." in content
    assert "The most relevant documents for the question are [3] and " in content


def test_repeat_sends_the_user_turn_twice_and_says_what_it_added(client: Any, fake: FakeUpstream) -> None:
    body = chat(litm())
    body["messages"].insert(0, {"role": "system", "content": "Be brief."})
    response = post(client, body, "repeat")
    messages = sent(fake)["messages"]
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1]["content"] == f"{litm()}\n\n{litm()}"
    strategy = response.headers["x-context-strategy"]
    assert strategy.startswith("repeat; repeated=user-turn; tokens=+")
    assert int(strategy.rsplit("+", 1)[1]) > 50


def test_repeat_after_reorder_repeats_the_reordered_prompt(client: Any, fake: FakeUpstream) -> None:
    post(client, chat(litm()), "reorder; ranker=lexical, repeat")
    content = sent(fake)["messages"][0]["content"]
    first, second = content.split("\nAnswer:\n\n", 1)
    assert first.index("Gamma rays") < first.index("Alpha grows")
    assert second.startswith(first.split("\n\n", 1)[0])
    assert content.count("Gamma rays come from stars.") == 2


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        (
            [
                {"role": "user", "content": "What is the weather?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                 "function": {"name": "weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "Sunny."},
            ],
            "not-user-last",
        ),
        (
            [{"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                          {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}],
            "non-text",
        ),
    ],
    ids=["tool-result-last", "image"],
)  # fmt: skip
def test_repeat_leaves_tools_and_images_alone(
    client: Any, fake: FakeUpstream, messages: list[dict[str, Any]], reason: str
) -> None:
    raw = json.dumps({"model": "m", "messages": messages}).encode()
    headers = {"content-type": "application/json", "x-context-strategy": "repeat"}
    response = client.post("/v1/chat/completions", content=raw, headers=headers)
    assert response.headers["x-context-strategy"] == f"repeat; skipped={reason}"
    assert fake.requests[-1].content == raw


def test_repeat_past_its_limit_sends_the_request_as_it_came(client: Any, fake: FakeUpstream) -> None:
    raw = json.dumps(chat(litm())).encode()
    headers = {"content-type": "application/json", "x-context-strategy": "repeat; limit=60"}
    response = client.post("/v1/chat/completions", content=raw, headers=headers)
    assert response.headers["x-context-strategy"] == "repeat; limit=60; skipped=over-limit"
    assert fake.requests[-1].content == raw

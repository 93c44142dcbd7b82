"""`excerpt` sends the client's context byte for byte and adds one block, just before the question, that quotes the
most relevant passage verbatim: in the question's own message after the context (the paper's format, LangChain's
joins, a stream), or at the start of the last user turn where the context is a system message or tool results."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from contextlift.strategies import TiktokenTokenizer
from tests.fakes import FakeUpstream, chunk, sse_body, sse_response
from tests.serving import chat

QUESTION = "Where do gamma rays come from?"
TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars.", "Delta lies at the mouth."]
BLOCK = 'Relevant excerpt (from document 3):\n"""\nGamma rays come from stars.\n"""'
STRATEGY = "excerpt; ranker=lexical"


def post(client: Any, body: dict[str, Any]) -> Any:
    return client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": STRATEGY})


def inserted(original: str, sent: str) -> tuple[int, str]:
    """Where `sent` has text that `original` lacks, and that text: `sent` must be `original` with one insertion."""
    at = next((i for i, (a, b) in enumerate(zip(original, sent, strict=False)) if a != b), len(original))
    added = sent[at : at + len(sent) - len(original)]
    assert sent[:at] + sent[at + len(added) :] == original
    return at, added


def assert_one_block(
    original: dict[str, Any],
    sent: dict[str, Any],
    message: int,
    response: Any,
    block: str = BLOCK,
    quoted: str = "quoted",
) -> str:
    """Only message `message` changed, by one insertion holding the block; the header reports the tokens added,
    under `quoted` (`quoted_paragraph` where the units are paragraphs, not documents). Returns the message's text
    as sent."""
    assert len(sent["messages"]) == len(original["messages"])
    for i, (before, after) in enumerate(zip(original["messages"], sent["messages"], strict=True)):
        if i != message:
            assert after == before
    before, after = original["messages"][message], sent["messages"][message]
    assert {k: v for k, v in after.items() if k != "content"} == {k: v for k, v in before.items() if k != "content"}
    _, added = inserted(before["content"], after["content"])
    assert added.strip() == block
    assert after["content"].count("Relevant excerpt") == 1
    tokens = TiktokenTokenizer().count(added)
    assert response.headers["x-context-strategy"] == f"{STRATEGY}; {quoted}=3; tokens=+{tokens}"
    return str(after["content"])


def litm() -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(TEXTS, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: {QUESTION}\nAnswer:"


def test_the_paper_format_gets_the_block_after_the_context_before_the_question(client: Any, fake: FakeUpstream) -> None:
    original = chat(litm())
    response = post(client, copy.deepcopy(original))
    assert response.status_code == 200
    content = assert_one_block(original, fake.bodies[-1], 0, response)
    head, _, tail = litm().partition("\n\nQuestion:")
    assert content == f"{head}\n\n{BLOCK}\n\nQuestion:{tail}"
    assert response.headers["x-context-order"] == "kept"


@pytest.mark.parametrize("join", ["\n\n---\n\n", "\n\n"], ids=["separated", "blank-lines-only"])
def test_a_langchain_context_keeps_its_chunks_and_gets_the_best_one_quoted(
    client: Any, fake: FakeUpstream, join: str
) -> None:
    context = join.join(TEXTS)
    original = chat(f"Answer the question based only on the following context:\n{context}\n\nQuestion: {QUESTION}\n")
    response = post(client, copy.deepcopy(original))
    # Chunks that blank lines alone separate are a guessed reading: its units' positions are no number the client
    # gave, so the framing names none.
    block = BLOCK if join != "\n\n" else BLOCK.replace("Relevant excerpt (from document 3):", "Relevant excerpt:")
    quoted = "quoted" if join != "\n\n" else "quoted_paragraph"
    content = assert_one_block(original, fake.bodies[-1], 0, response, block, quoted)
    assert content == (
        f"Answer the question based only on the following context:\n{context}\n\n{block}\n\nQuestion: {QUESTION}\n"
    )
    if join == "\n\n":
        # Chunks that blank lines alone separate: read as paragraphs, quoted, never moved.
        assert response.headers["x-context-format"] == "none: ambiguous-chunks"
        assert "x-context-order" not in response.headers


def test_a_system_message_context_gets_the_block_at_the_start_of_the_user_turn(client: Any, fake: FakeUpstream) -> None:
    sources = "\n\n---\n\n".join(TEXTS)
    system = f"Use the following pieces of retrieved context to answer the question.\n\nContext:\n{sources}"
    original = {
        "model": "fake-model",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": QUESTION}],
    }
    response = post(client, copy.deepcopy(original))
    assert response.headers["x-context-documents"] == "4"
    content = assert_one_block(original, fake.bodies[-1], 1, response)
    assert content == f"{BLOCK}\n\n{QUESTION}"


def test_tool_results_stay_as_they_came_and_the_user_turn_gets_the_block(client: Any, fake: FakeUpstream) -> None:
    calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": "{}"}} for i in range(1, 5)
    ]
    original = {
        "model": "fake-model",
        "messages": [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": f"c{i}", "content": t} for i, t in enumerate(TEXTS, 1)),
        ],
    }
    response = post(client, copy.deepcopy(original))
    assert response.headers["x-context-format"].startswith("messages; role=tool")
    content = assert_one_block(original, fake.bodies[-1], 0, response)
    assert content == f"{BLOCK}\n\n{QUESTION}"


def test_a_streamed_request_goes_with_the_block_and_streams_back(client: Any, fake: FakeUpstream) -> None:
    events = [chunk("From"), chunk(" stars."), chunk(finish="stop")]
    fake.queue(sse_response(sse_body(events)))
    original = chat(litm(), stream=True)
    response = post(client, copy.deepcopy(original))
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text.endswith("data: [DONE]\n\n")
    sent = fake.bodies[-1]
    assert sent["stream"] is True
    head, _, tail = litm().partition("\n\nQuestion:")
    assert assert_one_block(original, sent, 0, response) == f"{head}\n\n{BLOCK}\n\nQuestion:{tail}"


def test_the_body_sent_upstream_differs_only_by_the_block(client: Any, fake: FakeUpstream) -> None:
    """Byte for byte on the wire: the client's compact JSON, the one string grown by the block."""
    original = chat(litm(), temperature=0.2)
    raw = json.dumps(original, separators=(",", ":")).encode()
    response = client.post(
        "/v1/chat/completions",
        content=raw,
        headers={"content-type": "application/json", "x-context-strategy": STRATEGY},
    )
    assert response.status_code == 200
    _, added = inserted(raw.decode(), fake.requests[-1].content.decode())
    assert json.loads(f'"{added}"').strip() == BLOCK


def test_a_passage_of_a_guessed_reading_is_named_by_no_number(client: Any, fake: FakeUpstream) -> None:
    # Four chunks, the first of two paragraphs: the client's third chunk is the guessed reading's fourth paragraph.
    context = "\n\n".join(["Alpha grows in spring.\n\nIt is green.", *TEXTS[1:]])
    original = chat(f"Answer the question based only on the following context:\n{context}\n\nQuestion: {QUESTION}\n")
    post(client, copy.deepcopy(original))
    content = fake.bodies[-1]["messages"][0]["content"]
    assert "Relevant excerpt:\n" in content
    assert "from document" not in content


def test_below_its_gate_it_adds_nothing_and_says_the_margin(client: Any, fake: FakeUpstream) -> None:
    # Two passages answer alike: the ranker's first leads its second by nothing, so nothing is quoted.
    texts = ["Gamma rays come from stars.", "Beta is a river.", "Gamma rays come from stars far away.", "Delta."]
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(texts, 1))
    original = chat(f"Answer from the documents.\n\n{lines}\n\nQuestion: {QUESTION}\nAnswer:")
    raw = json.dumps(original, separators=(",", ":")).encode()
    gated = "excerpt; ranker=lexical; gate=0.5"
    response = client.post(
        "/v1/chat/completions", content=raw, headers={"content-type": "application/json", "x-context-strategy": gated}
    )
    assert response.status_code == 200
    strategy = response.headers["x-context-strategy"]
    assert strategy.startswith(f"{gated}; skipped=margin; margin=0.")
    assert float(strategy.rsplit("margin=", 1)[1]) < 0.5
    assert fake.requests[-1].content == raw


def test_at_or_above_its_gate_it_quotes_as_without_one(client: Any, fake: FakeUpstream) -> None:
    original = chat(litm())
    response = client.post(
        "/v1/chat/completions", json=original, headers={"x-context-strategy": f"{STRATEGY}; gate=0.5"}
    )
    assert response.headers["x-context-strategy"].startswith(f"{STRATEGY}; gate=0.5; quoted=3; tokens=+")
    assert BLOCK in fake.bodies[-1]["messages"][0]["content"]

"""`pick` asks the upstream which passages answer the question (one call, the proxy's own numbering), then sends the
client's request with those passages moved first, labels and all, where the request proves its documents'
boundaries, or quoted before the question where it does not; an answer that names no passage, or a picking call
that fails, leaves the body byte for byte. The response's usage counts both calls."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx

from tests.fakes import FakeUpstream, chunk, completion, sse_body
from tests.serving import chat

QUESTION = "Where do gamma rays come from?"
TEXTS = ["Alpha grows in spring.", "Beta is a river.", "Gamma rays come from stars.", "Delta lies at the mouth."]


def litm() -> str:
    lines = "\n".join(f"Document [{i}](Title: T{i}) {t}" for i, t in enumerate(TEXTS, 1))
    return f"Answer from the documents.\n\n{lines}\n\nQuestion: {QUESTION}\nAnswer:"


def picked(answer: str) -> httpx.Response:
    return httpx.Response(200, json=completion(answer, prompt_tokens=40, completion_tokens=3))


def post(client: Any, body: dict[str, Any], strategy: str = "pick") -> Any:
    return client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": strategy})


def post_raw(client: Any, strategy: str = "pick") -> tuple[bytes, Any]:
    """The paper's prompt sent as exact bytes, and the response: a step that declines must forward these bytes."""
    raw = json.dumps(chat(litm()), separators=(",", ":")).encode()
    headers = {"content-type": "application/json", "x-context-strategy": strategy}
    return raw, client.post("/v1/chat/completions", content=raw, headers=headers)


def test_the_picking_call_numbers_every_passage_and_asks_for_numbers(client: Any, fake: FakeUpstream) -> None:
    fake.queue(picked("3"))
    post(client, chat(litm(), temperature=0.8, max_tokens=200))
    asked = fake.bodies[0]
    prompt = asked["messages"][-1]["content"]
    for number, text in enumerate(TEXTS, start=1):
        assert f"[{number}] {text}" in prompt
    assert f"Question: {QUESTION}" in prompt
    assert asked["max_tokens"] == 16
    assert asked["temperature"] == 0
    assert "stream" not in asked


def test_the_passages_it_names_move_first_with_their_labels(client: Any, fake: FakeUpstream) -> None:
    fake.queue(picked("Passages 3, 1"))
    response = post(client, chat(litm()))
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "pick; picked=3+1"
    assert response.headers["x-context-order"] == "3,1,2,4"
    sent = fake.bodies[1]["messages"][0]["content"]
    lines = [line for line in sent.splitlines() if line.startswith("Document")]
    assert lines[0].endswith("Gamma rays come from stars.")
    assert lines[1].endswith("Alpha grows in spring.")
    assert len(lines) == 4


def test_usage_counts_the_picking_call(client: Any, fake: FakeUpstream) -> None:
    fake.queue(picked("3"), httpx.Response(200, json=completion("Stars.", prompt_tokens=50, completion_tokens=2)))
    usage = post(client, chat(litm())).json()["usage"]
    assert usage["prompt_tokens"] == 90
    assert usage["completion_tokens"] == 5


def test_an_answer_that_names_no_passage_leaves_the_body_byte_for_byte(client: Any, fake: FakeUpstream) -> None:
    for answer in ("None of them.", "7, 12, 0", ""):
        fake.queue(picked(answer))
        raw, response = post_raw(client)
        assert response.headers["x-context-strategy"] == "pick; skipped=no-pick"
        assert fake.requests[-1].content == raw


def test_a_picking_call_that_fails_leaves_the_body_and_the_request_is_answered(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(400, json={"error": {"message": "no", "type": "invalid_request_error"}}))
    raw, response = post_raw(client)
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "pick; skipped=pick-failed"
    assert fake.requests[-1].content == raw


def test_where_nothing_may_move_the_picked_paragraph_is_quoted_before_the_question(
    client: Any, fake: FakeUpstream
) -> None:
    context = "\n\n".join(TEXTS)
    original = chat(f"Answer the question based only on the following context:\n{context}\n\nQuestion: {QUESTION}\n")
    fake.queue(picked("3"))
    response = post(client, copy.deepcopy(original))
    assert response.headers["x-context-strategy"].startswith("pick; picked=3; quoted_paragraph=3; tokens=+")
    sent = fake.bodies[1]["messages"][0]["content"]
    block = sent.index("Relevant excerpt")
    assert sent.index("Gamma rays come from stars.") < block < sent.index(f"Question: {QUESTION}")
    # The context before the block is the client's, byte for byte.
    assert sent.startswith(original["messages"][0]["content"][: original["messages"][0]["content"].index("Question:")])


def test_a_streaming_client_gets_its_stream_after_a_picking_call_that_is_not(client: Any, fake: FakeUpstream) -> None:
    streamed = httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=sse_body([chunk("Stars."), chunk(finish="stop")])
    )
    fake.queue(picked("3"), streamed)
    response = post(client, chat(litm(), stream=True))
    assert response.status_code == 200
    assert "stream" not in fake.bodies[0]
    assert fake.bodies[1]["stream"] is True
    assert "Stars." in response.text
    assert response.text.rstrip().endswith("data: [DONE]")


def test_pick_costs_two_calls_up_front(client: Any) -> None:
    from contextlift.strategies import build_registry, parse_selection

    registry = build_registry()
    assert registry.resolve(parse_selection("pick"), {}).max_upstream_calls() == 2
    assert registry.resolve(parse_selection("pick, medoid; k=3"), {}).max_upstream_calls() == 4


def test_with_two_orders_only_a_passage_both_calls_name_moves(client: Any, fake: FakeUpstream) -> None:
    # The second call numbers the passages in reverse: its [2] is the client's document 3. The calls go together, so
    # each is answered by what it shows.
    def gamma(request: httpx.Request) -> httpx.Response:
        shown = json.loads(request.content)["messages"][-1]["content"]
        return picked("3" if f"[1] {TEXTS[0]}" in shown else "2")

    fake.queue(gamma, gamma)
    response = post(client, chat(litm()), "pick; orders=2")
    assert response.headers["x-context-strategy"] == "pick; orders=2; picked=3"
    assert response.headers["x-context-upstream-calls"] == "3"
    reversed_call = next(b for b in fake.bodies[:2] if f"[1] {TEXTS[3]}" in b["messages"][-1]["content"])
    assert f"[4] {TEXTS[0]}" in reversed_call["messages"][-1]["content"]


def test_a_model_that_names_whatever_comes_first_is_not_followed(client: Any, fake: FakeUpstream) -> None:
    fake.queue(picked("1, 2"), picked("1, 2"))
    raw, response = post_raw(client, "pick; orders=2")
    assert response.headers["x-context-strategy"] == "pick; orders=2; skipped=disagree"
    assert fake.requests[-1].content == raw

"""The openai SDK's `client.responses.create` through the proxy: without a strategy the upstream receives the same
request and the application gets the same object or stream as straight to the upstream; with `reorder` the documents
given as input text parts (file-search-style chunks) or as function calls' outputs go upstream in the ranked order,
each call's id with its output, every other field as sent, the answer relayed as the upstream wrote it. A step that
calls the upstream itself, and an input the proxy cannot read exactly, leave the request as sent and say why."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.contract.compat_harness import Compat, Reply, ScriptedUpstream
from tests.contract.compat_replies import MODEL, PROVIDER_HEADERS
from tests.contract.test_compat_openai import CLIENT, FLAVOURS, sdk_call
from tests.fakes import FakeUpstream

QUESTION = "When was the Eiffel Tower completed?"
CHUNKS = [
    "The Loire valley is known for its castles and vineyards along the river.",
    "Mont Blanc is the highest mountain in the Alps, on the border with Italy.",
    "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    "Bordeaux wines are produced in the southwest of France near the Atlantic.",
    "Marseille is a port city on the Mediterranean coast of France.",
]
GOLD = 2
"""The chunk that answers QUESTION, third as the client sends them."""
TOOL: Any = {"type": "function", "name": "search", "description": "Search the handbook.",
             "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}  # fmt: skip


def response(text: str = "In 1889.") -> dict[str, Any]:
    return {
        "id": "resp_fake_1", "object": "response", "created_at": 1_733_400_000, "status": "completed",
        "model": MODEL, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [{"type": "message", "id": "msg_fake_1", "status": "completed", "role": "assistant",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 40, "output_tokens": 4, "total_tokens": 44,
                  "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}},
    }  # fmt: skip


def answered() -> Reply:
    return Reply.json(response(), headers=PROVIDER_HEADERS)


def streamed() -> Reply:
    """The Responses API's event stream: `event:` and `data:` lines, no `[DONE]`."""
    done = response()
    events = [
        ("response.created", {"type": "response.created", "sequence_number": 0,
                              "response": {**done, "status": "in_progress", "output": [], "usage": None}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": 1,
                                        "item_id": "msg_fake_1", "output_index": 0, "content_index": 0,
                                        "delta": "In 1889.", "logprobs": []}),
        ("response.completed", {"type": "response.completed", "sequence_number": 2, "response": done}),
    ]  # fmt: skip
    frames = tuple(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)
    return Reply(200, (("content-type", "text/event-stream; charset=utf-8"), *PROVIDER_HEADERS.items()), frames)


def file_search_input() -> list[dict[str, Any]]:
    """The chunks a retrieval step found, one input text part each, the question last."""
    parts = [{"type": "input_text", "text": chunk} for chunk in CHUNKS]
    return [{"role": "user", "content": [*parts, {"type": "input_text", "text": QUESTION}]}]


def tool_outputs_input() -> list[dict[str, Any]]:
    """The question, the model's five search calls, and their outputs."""
    arguments = json.dumps({"q": "tower"})
    calls = [{"type": "function_call", "call_id": f"call_{i}", "name": "search", "arguments": arguments}
             for i in range(len(CHUNKS))]  # fmt: skip
    outputs = [{"type": "function_call_output", "call_id": f"call_{i}", "output": chunk}
               for i, chunk in enumerate(CHUNKS)]  # fmt: skip
    return [{"role": "user", "content": QUESTION}, *calls, *outputs]


def create(flavour: str, **kwargs: Any) -> Any:
    return sdk_call(flavour, "responses.create", model=MODEL, **kwargs)


@FLAVOURS
def test_a_response_to_a_string_input(compat: Compat, flavour: str) -> None:
    compat.check(answered(), create(flavour, input=QUESTION, instructions="Answer briefly.", max_output_tokens=50))


@FLAVOURS
def test_a_streamed_response(compat: Compat, flavour: str) -> None:
    compat.check(streamed(), create(flavour, input=QUESTION, stream=True))


def test_file_search_style_chunks_without_a_strategy(compat: Compat) -> None:
    compat.check(answered(), create("sync", input=file_search_input(), tools=[TOOL], temperature=0.1))


def test_function_call_outputs_without_a_strategy(compat: Compat) -> None:
    compat.check(answered(), create("sync", input=tool_outputs_input(), tools=[TOOL]))


def through_the_proxy(
    scripted_upstream: ScriptedUpstream, proxy: str, reply: Reply, strategy: str, **kwargs: Any
) -> tuple[Any, dict[str, str], Any]:
    """`client.responses.create(**kwargs)` through the proxy with `X-Context-Strategy: strategy`: what the upstream
    received, the response's headers, and what the application got."""
    scripted_upstream.play([reply])
    with openai.OpenAI(base_url=f"{proxy}/v1", **CLIENT) as client:
        raw = client.responses.with_raw_response.create(
            model=MODEL, extra_headers={"X-Context-Strategy": strategy}, **kwargs
        )
        got = raw.parse()
        headers = dict(raw.headers)
    [received] = scripted_upstream.received
    assert received.path == "/v1/responses"
    return received.body, headers, got


def test_reorder_moves_file_search_chunks_and_keeps_everything_else(
    scripted_upstream: ScriptedUpstream, origins: tuple[str, str]
) -> None:
    sent = file_search_input()
    body, headers, got = through_the_proxy(scripted_upstream, origins[1], answered(), "reorder", input=sent,
                                           tools=[TOOL], temperature=0.1, metadata={"team": "search"})  # fmt: skip
    parts = body["input"][0]["content"]
    assert parts[0] == {"type": "input_text", "text": CHUNKS[GOLD]}  # the best-ranked chunk first
    assert sorted(p["text"] for p in parts[:-1]) == sorted(CHUNKS)
    assert parts[-1] == {"type": "input_text", "text": QUESTION}
    assert {k: v for k, v in body.items() if k != "input"} == {
        "model": MODEL,
        "tools": [TOOL],
        "temperature": 0.1,
        "metadata": {"team": "search"},
    }
    assert headers["x-context-strategy"] == "reorder"
    assert headers["x-context-format"] == "parts"
    assert headers["x-context-documents"] == "5"
    assert headers["x-context-order"].startswith(f"{GOLD + 1},")
    assert got.output_text == "In 1889."


def test_reorder_moves_function_call_outputs_each_with_its_call_id(
    scripted_upstream: ScriptedUpstream, origins: tuple[str, str]
) -> None:
    sent = tool_outputs_input()
    body, headers, _ = through_the_proxy(scripted_upstream, origins[1], answered(), "reorder", input=sent, tools=[TOOL])
    items = body["input"]
    assert items[: 1 + len(CHUNKS)] == sent[: 1 + len(CHUNKS)]  # the question and the calls, as sent
    outputs = items[1 + len(CHUNKS) :]
    assert outputs[0] == {"type": "function_call_output", "call_id": f"call_{GOLD}", "output": CHUNKS[GOLD]}
    assert sorted((o["call_id"], o["output"]) for o in outputs) == [(f"call_{i}", c) for i, c in enumerate(CHUNKS)]
    assert headers["x-context-strategy"] == "reorder"
    assert headers["x-context-format"] == "messages; role=tool"


def test_a_streamed_response_after_a_reorder_is_the_upstreams_own_events(
    scripted_upstream: ScriptedUpstream, origins: tuple[str, str]
) -> None:
    scripted_upstream.play([streamed()])
    with openai.OpenAI(base_url=f"{origins[1]}/v1", **CLIENT) as client:
        events = list(client.responses.create(model=MODEL, input=file_search_input(), stream=True,
                                              extra_headers={"X-Context-Strategy": "reorder"}))  # fmt: skip
    [received] = scripted_upstream.received
    assert received.body["input"][0]["content"][0]["text"] == CHUNKS[GOLD]
    assert [e.type for e in events] == ["response.created", "response.output_text.delta", "response.completed"]
    assert events[-1].response.output_text == "In 1889."


@pytest.mark.parametrize(
    ("strategy", "given", "said"),
    [
        ("medoid", file_search_input(), "medoid -> none: chat-only"),
        ("reorder", [{"type": "reasoning", "id": "rs_1", "summary": []}, *file_search_input()], "none"),
    ],
    ids=["an-executor", "a-reasoning-item"],
)
def test_what_the_route_cannot_do_goes_as_sent_and_says_why(
    scripted_upstream: ScriptedUpstream, origins: tuple[str, str], strategy: str, given: Any, said: str
) -> None:
    body, headers, _ = through_the_proxy(scripted_upstream, origins[1], answered(), strategy, input=given)
    assert body == {"model": MODEL, "input": given}
    assert headers["x-context-strategy"] == said
    if strategy == "reorder":
        assert headers["x-context-format"] == "none: unsupported-input-item=reasoning"


@pytest.mark.parametrize(
    ("content_type", "content"),
    [
        ("text/plain", b"not json at all"),
        ("application/json", b'{"model": "m", "input": '),
        ("application/json", b"[1]"),
    ],
    ids=["not-json", "torn-json", "not-an-object"],
)
def test_a_body_the_route_cannot_read_is_relayed_as_sent(
    scripted_upstream: ScriptedUpstream, origins: tuple[str, str], content_type: str, content: bytes
) -> None:
    scripted_upstream.play(
        [Reply.json({"error": {"message": "bad body", "type": "invalid_request_error"}}, status=400)]
    )
    response = httpx.post(f"{origins[1]}/v1/responses", content=content,
                          headers={"content-type": content_type, "X-Context-Strategy": "reorder"})  # fmt: skip
    [received] = scripted_upstream.received
    assert received.path == "/v1/responses"
    assert received.body == content.decode() or received.body == json.loads(content)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "bad body"


@pytest.mark.parametrize("strategy", ["reorder", "filter; top=1"])
def test_a_step_that_moves_the_instructions_among_the_inputs_documents_leaves_the_request_as_sent(
    make_client: Any, fake: FakeUpstream, strategy: str
) -> None:
    sources = [f"Source: the handbook, chapter {n}, says the {topic} closes at {hour}." for n, topic, hour in
               ((2, "library", 6), (3, "tower", 7), (4, "museum", 5), (5, "garden", 8))]  # fmt: skip
    given = [*({"type": "message", "role": "developer", "content": s} for s in sources), {"role": "user", "content":
             "When does the tower close?"}]  # fmt: skip
    instructions = "Source: the handbook, chapter 1, says the pool closes at 9."
    raw = json.dumps({"model": MODEL, "instructions": instructions, "input": given}).encode()
    fake.queue(httpx.Response(200, json=response()))
    headers = {"content-type": "application/json", "X-Context-Strategy": strategy}
    answer = make_client().post("/v1/responses", content=raw, headers=headers)
    assert fake.requests[0].content == raw
    assert answer.headers["x-context-strategy"] == f"{strategy} -> none: instructions-moved"
    assert "x-context-order" not in answer.headers


@pytest.mark.parametrize(
    "part",
    [
        {"type": "text", "text": "A chat-style part."},
        {"type": "input_text", "text": "x", "_contextlift_type": "input_image"},
    ],
    ids=["chat-style-text", "forged-private-key"],
)
def test_a_part_that_is_not_a_responses_text_part_is_not_read(
    scripted_upstream: ScriptedUpstream, origins: tuple[str, str], part: dict[str, Any]
) -> None:
    given = file_search_input()
    given[0]["content"].insert(1, part)
    body, headers, _ = through_the_proxy(scripted_upstream, origins[1], answered(), "reorder", input=given)
    assert body == {"model": MODEL, "input": given}
    assert headers["x-context-format"] == "none: unsupported-input-item=message"


def test_a_number_json_cannot_write_back_leaves_the_clients_bytes(
    scripted_upstream: ScriptedUpstream, origins: tuple[str, str]
) -> None:
    raw = json.dumps({"model": MODEL, "input": file_search_input()}).encode()[:-1] + b', "temperature": 1e999}'
    scripted_upstream.play([answered()])
    response = httpx.post(f"{origins[1]}/v1/responses", content=raw,
                          headers={"content-type": "application/json", "X-Context-Strategy": "reorder"})  # fmt: skip
    assert response.status_code == 200
    [received] = scripted_upstream.received
    assert received.body["input"] == file_search_input()  # the bytes as sent: nothing re-encoded

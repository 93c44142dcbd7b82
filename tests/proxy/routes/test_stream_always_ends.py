"""Whatever fails, wherever in the stream pipeline, a stream that has started ends with an error event and
`[DONE]`: never a cut connection, never a traceback to the client."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

import contextlift.proxy.routes.chat_streams
import contextlift.proxy.routes.stream_usage
from tests.fakes import FakeUpstream, chunk, completion, sse_body, sse_response
from tests.serving import chat

DOCS = "\n".join(f"Document [{i}](Title: Place {i}) Place {i} exports item {i}." for i in range(1, 5))
QUESTION = f"{DOCS}\n\nQuestion: what does place 3 export?"


def frames(text: str) -> list[str]:
    return [f.removeprefix("data: ") for f in text.split("\n\n") if f]


def assert_error_then_done(text: str) -> dict[str, Any]:
    lines = frames(text)
    assert lines[-1] == "[DONE]"
    error = json.loads(lines[-2])
    assert "error" in error
    return dict(error["error"])


def boom(*_: Any, **__: Any) -> Any:
    raise RuntimeError("injected")


STAGES = [
    (contextlift.proxy.routes.stream_usage.StreamUsage, "observe"),
    (contextlift.proxy.routes.stream_usage.StreamUsage, "missing_chunk"),
    (contextlift.proxy.routes.chat_streams, "data_frame"),
    (contextlift.proxy.routes.chat_streams, "next_or_drained"),
]


@pytest.mark.parametrize(("owner", "name"), STAGES, ids=[name for _, name in STAGES])
def test_a_failure_at_any_stage_of_a_relayed_stream_ends_it_cleanly(
    client: Any, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch, owner: Any, name: str
) -> None:
    monkeypatch.setattr(owner, name, boom)
    fake.queue(sse_response(sse_body([chunk("one"), chunk("two")])))
    response = client.post("/v1/chat/completions", json=chat(stream=True, stream_options={"include_usage": True}))
    assert response.status_code == 200
    assert assert_error_then_done(response.text)["code"] == "internal_error"


@pytest.mark.parametrize("name", ["completion_frames", "completion_chunks"])
def test_a_failure_while_framing_a_medoid_answer_ends_the_stream_cleanly(
    client: Any, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(contextlift.proxy.routes.chat_streams, name, boom)
    response = client.post(
        "/v1/chat/completions", json=chat(QUESTION, stream=True), headers={"x-context-strategy": "medoid; k=2"}
    )
    assert assert_error_then_done(response.text)["code"] == "internal_error"


def test_medoid_candidates_with_non_object_choices_end_the_stream_cleanly(client: Any, fake: FakeUpstream) -> None:
    broken = {**completion(), "choices": ["not", "objects"]}
    fake.queue(*[httpx.Response(200, json=broken)] * 3)
    response = client.post(
        "/v1/chat/completions", json=chat(QUESTION, stream=True), headers={"x-context-strategy": "medoid; k=3"}
    )
    assert response.status_code == 200
    assert assert_error_then_done(response.text)["code"] == "upstream_protocol_error"


def test_n_choices_with_include_usage_end_with_done(client: Any, fake: FakeUpstream) -> None:
    events = [
        json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                    "choices": [{"index": i, "delta": {"content": f"answer {i}"}, "finish_reason": None}]})
        for i in range(5)
    ]  # fmt: skip
    fake.queue(sse_response(sse_body(events)))
    body = chat(stream=True, n=5, stream_options={"include_usage": True})
    response = client.post("/v1/chat/completions", json=body)
    lines = frames(response.text)
    assert lines[-1] == "[DONE]"
    assert json.loads(lines[-2])["usage"]["completion_tokens"] > 0

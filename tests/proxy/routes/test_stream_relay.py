"""Streaming: upstream events relayed one by one, however the bytes were split, ending in [DONE]."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextlift.proxy import Settings, create_app
from contextlift.strategies import TiktokenTokenizer
from tests.fakes import FakeEmbedder, FakeUpstream, chunk, sse_body, sse_response
from tests.serving import UPSTREAM, chat

EVENTS = [chunk("The"), chunk(" capital"), chunk(" is"), chunk(" Paris."), chunk(finish="stop")]


def data_lines(text: str) -> list[str]:
    frames = [f for f in text.split("\n\n") if f]
    assert all(f.startswith("data: ") for f in frames), frames
    return [f.removeprefix("data: ") for f in frames]


def test_stream_relays_each_event_and_ends_with_done(client: Any, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body(EVENTS)))
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-context-upstream-calls"] == "1"
    assert data_lines(response.text) == [*EVENTS, "[DONE]"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(sse_body(EVENTS)) - 1), max_size=30))
def test_events_split_at_any_byte_boundary_arrive_whole(cuts: list[int]) -> None:
    from litestar.testing import TestClient

    fake = FakeUpstream().queue(sse_response(sse_body(EVENTS), split_at=cuts))
    with TestClient(
        create_app(Settings(upstream_url=UPSTREAM), transport=fake.transport(), embedder=FakeEmbedder())
    ) as client:
        response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert data_lines(response.text) == [*EVENTS, "[DONE]"]


def test_crlf_framing_and_comments_are_normalised(client: Any, fake: FakeUpstream) -> None:
    body = b": keep-alive\r\n\r\n" + b"".join(f"data: {e}\r\n\r\n".encode() for e in EVENTS) + b"data: [DONE]\r\n\r\n"
    fake.queue(sse_response(body, split_at=[3, 17, 18]))
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert data_lines(response.text) == [*EVENTS, "[DONE]"]


def test_failure_mid_stream_becomes_an_error_event_then_done(client: Any, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body(EVENTS[:2], done=False), fail_after=True))
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    lines = data_lines(response.text)
    assert lines[:2] == EVENTS[:2]
    assert json.loads(lines[2])["error"]["code"] == "upstream_connection_lost"
    assert lines[3:] == ["[DONE]"]


def test_stream_ending_without_done_after_a_finish_reason_is_complete(client: Any, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body(EVENTS, done=False)))
    lines = data_lines(client.post("/v1/chat/completions", json=chat(stream=True)).text)
    assert lines == [*EVENTS, "[DONE]"]


def test_stream_ending_without_done_before_any_finish_reason_gets_an_error_event(
    client: Any, fake: FakeUpstream
) -> None:
    fake.queue(sse_response(sse_body(EVENTS[:-1], done=False)))
    lines = data_lines(client.post("/v1/chat/completions", json=chat(stream=True)).text)
    assert lines[: len(EVENTS) - 1] == EVENTS[:-1]
    assert "without [DONE]" in json.loads(lines[len(EVENTS) - 1])["error"]["message"]
    assert lines[-1] == "[DONE]"


def test_include_usage_is_added_when_the_upstream_omits_it(client: Any, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body(EVENTS)))
    body = chat(stream=True, stream_options={"include_usage": True})
    lines = data_lines(client.post("/v1/chat/completions", json=body).text)
    assert lines[: len(EVENTS)] == EVENTS
    usage_chunk = json.loads(lines[len(EVENTS)])
    assert usage_chunk["choices"] == []
    usage = usage_chunk["usage"]
    assert usage["completion_tokens"] == TiktokenTokenizer().count("The capital is Paris.")
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["estimated"] is True
    assert lines[-1] == "[DONE]"


def test_include_usage_from_the_upstream_is_relayed_untouched(client: Any, fake: FakeUpstream) -> None:
    usage = chunk(usage={"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13})
    fake.queue(sse_response(sse_body([*EVENTS, usage])))
    body = chat(stream=True, stream_options={"include_usage": True})
    lines = data_lines(client.post("/v1/chat/completions", json=body).text)
    assert lines == [*EVENTS, usage, "[DONE]"]


def test_no_usage_chunk_unless_asked(client: Any, fake: FakeUpstream) -> None:
    fake.queue(sse_response(sse_body(EVENTS)))
    lines = data_lines(client.post("/v1/chat/completions", json=chat(stream=True)).text)
    assert lines == [*EVENTS, "[DONE]"]

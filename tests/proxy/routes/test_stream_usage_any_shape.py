"""The usage counter of a relayed stream (`include_usage`) reads the upstream's chunks whatever their JSON shape:
a chunk that is not what a chat chunk holds counts for nothing, and never turns into the proxy's own error."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextlift.proxy.routes.stream_usage import StreamUsage
from tests.fakes import FakeUpstream, chunk, sse_body, sse_response
from tests.serving import chat

ODD_CHUNKS = [
    '{"id":"x","choices":5}',
    '{"id":"x","choices":"text"}',
    '{"id":"x","choices":{"delta":{"content":"a"}}}',
    '{"id":"x","choices":[5,null,"a",{"delta":7},{"delta":{"content":3}}]}',
    '{"id":"x","choices":true}',
]


class FakeWordTokenizer:
    """A fake tokenizer: one token per word."""

    def count(self, text: str) -> int:
        return len(text.split())


@pytest.mark.parametrize("odd", ODD_CHUNKS)
def test_the_counter_tolerates_any_chunk_shape(odd: str) -> None:
    usage = StreamUsage(chat(stream=True, stream_options={"include_usage": True}), FakeWordTokenizer())
    usage.observe(odd)
    usage.observe(chunk("two words"))
    missing = usage.missing_chunk()
    assert missing is not None
    assert missing["usage"]["completion_tokens"] == 2


def test_the_counter_tolerates_messages_that_are_not_a_list() -> None:
    body: dict[str, Any] = {"messages": 5, "stream": True, "stream_options": {"include_usage": True}}
    usage = StreamUsage(body, FakeWordTokenizer())
    missing = usage.missing_chunk()
    assert missing is not None
    assert missing["usage"]["prompt_tokens"] == 0


@pytest.mark.parametrize("odd", ODD_CHUNKS[:2])
def test_a_stream_with_non_list_choices_is_relayed_not_blamed_on_the_proxy(
    make_client: Any, fake: FakeUpstream, odd: str
) -> None:
    client = make_client()
    fake.queue(sse_response(sse_body([chunk("Hello"), odd, chunk(finish="stop")])))
    response = client.post("/v1/chat/completions", json=chat(stream=True, stream_options={"include_usage": True}))
    frames = [f.removeprefix("data: ") for f in response.text.split("\n\n") if f]
    assert response.status_code == 200
    assert frames[-1] == "[DONE]"
    assert json.loads(frames[1]) == json.loads(odd)
    assert not any("internal_error" in f for f in frames)
    assert json.loads(frames[-2])["usage"]["estimated"] is True

"""What an upstream sends is read under bounds: decoded size (a gzip bomb is a 502, never gigabytes), an
overall deadline for bodies and streams that trickle, strict JSON (no NaN, no lone surrogate) wherever the
proxy parses an answer, and only well-formed events relayed in a stream."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from contextlift.proxy.errors import UpstreamBodyTooLarge
from contextlift.proxy.upstream.bodies import decoded_chunks
from tests.cpu_time import cpu_clock
from tests.fakes import FakeUpstream, chunk, completion, sse_body, sse_response
from tests.serving import chat


def bomb(decoded_bytes: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b"\0" * (1024 * 1024)
    parts = [compressor.compress(block) for _ in range(decoded_bytes // len(block))]
    return b"".join(parts) + compressor.flush()


BOMB = bomb(256 * 1024 * 1024)


async def network(body: bytes) -> AsyncIterator[bytes]:
    for start in range(0, len(body), 64 * 1024):
        yield body[start : start + 64 * 1024]


def gzipped(status: int, body: bytes) -> httpx.Response:
    """As it comes off the network: raw, in 64 KiB reads (bytes given whole would be decoded by httpx itself)."""
    headers = {"content-encoding": "gzip", "content-type": "application/json"}
    return httpx.Response(status, content=network(body), headers=headers)


def frames(text: str) -> list[str]:
    return [f.removeprefix("data: ") for f in text.split("\n\n") if f]


@pytest.mark.parametrize("status", [200, 401])
def test_a_gzip_bomb_on_a_chat_answer_is_a_502(make_client: Any, fake: FakeUpstream, status: int) -> None:
    client = make_client(max_upstream_body_bytes=1024 * 1024, max_retries=0)
    fake.queue(gzipped(status, BOMB))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_body_too_large"


def test_a_gzip_bomb_as_a_pass_through_error_body_is_a_502(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_upstream_body_bytes=1024 * 1024)
    fake.queue(gzipped(401, BOMB))
    response = client.get("/v1/models")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_body_too_large"


def test_a_compressed_answer_within_the_limit_is_relayed_decoded(client: Any, fake: FakeUpstream) -> None:
    fake.queue(gzipped(200, gzip.compress(json.dumps(completion("zipped")).encode())))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.json()["choices"][0]["message"]["content"] == "zipped"
    assert "content-encoding" not in response.headers


def test_an_encoding_the_proxy_did_not_ask_for_is_a_502(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, content=network(b"\x8b\x00"), headers={"content-encoding": "br"}))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 502


def test_the_proxy_asks_for_encodings_it_can_bound(client: Any, fake: FakeUpstream) -> None:
    client.post("/v1/chat/completions", json=chat())
    assert fake.requests[0].headers["accept-encoding"] == "gzip, deflate"


async def trickle(prefix: bytes) -> AsyncIterator[bytes]:
    yield prefix
    for _ in range(200):
        await asyncio.sleep(0.05)
        yield b"x"


def test_a_stream_that_trickles_forever_is_cut_at_the_deadline(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(upstream_timeout=5, upstream_deadline=1.0)
    body = f"data: {chunk('one')}\n\n".encode() + b"data: "
    fake.queue(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=trickle(body)))
    started = time.monotonic()
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert time.monotonic() - started < 4
    lines = frames(response.text)
    assert json.loads(lines[0]) == json.loads(chunk("one"))
    assert json.loads(lines[1])["error"]["code"] == "upstream_timeout"
    assert lines[-1] == "[DONE]"


def test_a_pass_through_body_that_trickles_forever_ends_at_the_deadline(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(upstream_timeout=5, upstream_deadline=1.0)
    fake.queue(httpx.Response(200, content=trickle(b"{")))
    started = time.monotonic()
    response = client.get("/v1/models")
    assert time.monotonic() - started < 4
    assert len(response.content) < 100


@pytest.mark.parametrize(
    "answer",
    [
        b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "\\ud800"}}]}',
        b'{"choices": [], "usage": {"prompt_tokens": NaN}}',
        b'{"choices": [], "x": Infinity}',
    ],
    ids=["lone-surrogate", "nan", "infinity"],
)
def test_an_answer_that_is_not_json_text_is_a_502(client: Any, fake: FakeUpstream, answer: bytes) -> None:
    fake.queue(httpx.Response(200, content=answer, headers={"content-type": "application/json"}))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_protocol_error"


@pytest.mark.parametrize(
    "event", ['{"choices": [{"delta": {"content": "\\udfff"}}]}', '{"x": NaN}', "not json", "[1, 2]"]
)
def test_a_malformed_event_ends_the_stream_with_an_error_event(client: Any, fake: FakeUpstream, event: str) -> None:
    fake.queue(sse_response(sse_body([chunk("one"), event, chunk("never")])))
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    lines = frames(response.text)
    assert json.loads(lines[0]) == json.loads(chunk("one"))
    assert json.loads(lines[1])["error"]["code"] == "upstream_protocol_error"
    assert lines[2:] == ["[DONE]"]


def test_a_huge_event_arriving_in_small_writes_is_decoded_in_linear_time() -> None:
    from contextlift.proxy.upstream.sse import SSEDecoder

    decoder = SSEDecoder(8 * 1024 * 1024)
    data = b"data: " + b"x" * 4_700_000 + b"\n\n"
    with cpu_clock() as elapsed:
        events = [e for i in range(0, len(data), 2048) for e in decoder.feed(data[i : i + 2048])]
    # Rescanning the buffer per write took 10 s of CPU; one pass takes milliseconds.
    assert elapsed() < 2
    assert len(events) == 1
    assert len(events[0].data) == 4_700_000


def test_a_local_pool_wait_is_not_blamed_on_the_upstream(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.PoolTimeout("no connection free"))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "upstream_pool_exhausted"
    assert response.headers["retry-after"] == "1"


def test_a_pass_through_event_stream_cut_mid_way_ends_with_an_error_event(client: Any, fake: FakeUpstream) -> None:
    body = f"data: {chunk('one')}\n\n".encode() + b'data: {"partial'
    fake.queue(sse_response(body, fail_after=True))
    response = client.post("/v1/completions", json={"model": "m", "prompt": "x", "stream": True})
    assert response.status_code == 200
    events = [e for e in response.text.split("\n\n") if e.strip()]
    assert json.loads(events[-2].removeprefix("data: "))["error"]["code"] == "upstream_connection_lost"
    assert events[-1] == "data: [DONE]"


async def test_an_answer_held_in_memory_over_the_bound_is_refused_before_any_of_it_goes() -> None:
    held = httpx.Response(200, content=b"x" * (200 * 1024))  # as a transport answering from memory gives it
    relayed: list[bytes] = []

    async def relay() -> None:
        async for piece in decoded_chunks(held, max_bytes=100 * 1024, stall_seconds=5, deadline=time.monotonic() + 5):
            relayed.append(piece)

    with pytest.raises(UpstreamBodyTooLarge):
        await relay()
    assert relayed == []

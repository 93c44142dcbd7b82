"""`upstream_timeout` on a stream is the longest wait for a complete event, on a real socket: an upstream that
writes a byte at a time without ever completing an event (or only comments) is cut at the stall bound, not held
until `upstream_deadline`; one whose events come within the bound streams to the end."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx

from contextlift.proxy import Settings, create_app
from tests.fakes import FakeEmbedder, chunk
from tests.serving import raw_upstream

STALL = 0.6
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def piece(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


CHAT: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def stream_through_proxy(
    url: str, path: str = "/v1/chat/completions", body: dict[str, Any] = CHAT
) -> tuple[list[str], float]:
    settings = Settings(upstream_url=url, upstream_timeout=STALL, upstream_deadline=60, max_retries=0)
    app = create_app(settings, embedder=FakeEmbedder())
    started = time.monotonic()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
        async with asyncio.timeout(15):  # without the fix the trickles below run for 20 s
            response = await client.post(path, json=body)
    await app.state["proxy"].upstream.aclose()
    frames = [f.removeprefix("data: ") for f in response.text.split("\n\n") if f]
    return frames, time.monotonic() - started


def trickling(first: bytes, each: bytes) -> Any:
    """One complete event, then `first`, then `each` every 0.1 s for 20 s, never completing another event."""

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(HEAD + piece(f"data: {chunk('one')}\n\n".encode()) + piece(first))
        for _ in range(200):
            await asyncio.sleep(0.1)
            if writer.is_closing():
                return
            writer.write(piece(each))
            await writer.drain()

    return answer


async def test_bytes_that_complete_no_event_do_not_hold_the_stall_timer_off() -> None:
    async with raw_upstream(trickling(b'data: {"choices":[{"index":0,"delta":{"content":"', b"a")) as (url, heads):
        frames, seconds = await stream_through_proxy(url)
    assert frames[0] == chunk("one")
    assert json.loads(frames[1])["error"]["code"] == "upstream_timeout"
    assert "no complete event" in json.loads(frames[1])["error"]["message"]
    assert frames[2:] == ["[DONE]"]
    assert seconds < STALL + 2
    assert len(heads) == 1


async def test_comment_lines_alone_do_not_hold_the_stall_timer_off() -> None:
    async with raw_upstream(trickling(b": keep-alive\n\n", b": keep-alive\n\n")) as (url, _):
        frames, seconds = await stream_through_proxy(url)
    assert json.loads(frames[1])["error"]["code"] == "upstream_timeout"
    assert seconds < STALL + 2


async def test_events_each_within_the_bound_stream_to_the_end_however_long_in_all() -> None:
    events = [chunk(f"w{i}") for i in range(6)]

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(HEAD)
        for event in events:
            await asyncio.sleep(STALL / 2)  # 1.8 s in all, three times the stall bound
            # Each event arrives in two pieces, the second completing it.
            writer.write(piece(f"data: {event}".encode()))
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(piece(b"\n\n"))
            await writer.drain()
        writer.write(piece(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    async with raw_upstream(answer) as (url, _):
        frames, seconds = await stream_through_proxy(url)
    assert frames == [*events, "[DONE]"]
    assert seconds > STALL * 2


async def test_a_relayed_event_stream_is_cut_at_the_stall_bound_too() -> None:
    completions = {"model": "m", "prompt": "hi", "stream": True}
    async with raw_upstream(trickling(b'data: {"choices":[{"text":"', b"a")) as (url, _):
        frames, seconds = await stream_through_proxy(url, "/v1/completions", completions)
    assert json.loads(frames[-2])["error"]["code"] == "upstream_timeout"
    assert frames[-1] == "[DONE]"
    assert seconds < STALL + 2

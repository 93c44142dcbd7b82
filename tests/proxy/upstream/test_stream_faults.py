"""Streams that stall, bloat, never end or are malformed: the client gets every event already produced
exactly once, then an error event and the end of the stream; nothing hangs, nothing is retried."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.fakes import FakeUpstream, chunk
from tests.serving import chat

EVENTS = [chunk("one"), chunk(" two")]


def frames(text: str) -> list[str]:
    return [f.removeprefix("data: ") for f in text.split("\n\n") if f]


def streaming(source: AsyncIterator[bytes]) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=source)


def test_a_stalled_stream_ends_with_a_timeout_event(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(upstream_timeout=0.3)

    async def stall() -> AsyncIterator[bytes]:
        for event in EVENTS:
            yield f"data: {event}\n\n".encode()
        await asyncio.sleep(30)
        yield b"data: never\n\n"

    fake.queue(streaming(stall()))
    started = time.monotonic()
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert time.monotonic() - started < 5
    lines = frames(response.text)
    assert lines[:2] == EVENTS
    assert json.loads(lines[2])["error"]["code"] == "upstream_timeout"
    assert lines[3:] == ["[DONE]"]
    assert len(fake.requests) == 1


def test_an_oversized_event_is_cut_off_without_reading_it_whole(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_event_bytes=1024 * 1024)
    sent = 0

    async def huge() -> AsyncIterator[bytes]:
        nonlocal sent
        yield f"data: {EVENTS[0]}\n\n".encode()
        yield b"data: "
        for _ in range(320):  # 20 MiB in 64 KiB pieces, no end of line
            sent += 1
            yield b"x" * 65536

    fake.queue(streaming(huge()))
    lines = frames(client.post("/v1/chat/completions", json=chat(stream=True)).text)
    assert lines[0] == EVENTS[0]
    assert "larger than" in json.loads(lines[1])["error"]["message"]
    assert lines[-1] == "[DONE]"
    assert sent < 40


def test_an_endless_stream_is_cut_off_at_the_byte_limit(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_stream_bytes=64 * 1024)

    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield f"data: {EVENTS[0]}\n\n".encode()

    fake.queue(streaming(endless()))
    lines = frames(client.post("/v1/chat/completions", json=chat(stream=True)).text)
    assert 100 < len(lines) < 1000
    assert set(lines[:-2]) == {EVENTS[0]}
    assert "longer than the limit" in json.loads(lines[-2])["error"]["message"]
    assert lines[-1] == "[DONE]"


def test_malformed_lines_are_ignored_and_events_relayed_identically(client: Any, fake: FakeUpstream) -> None:
    body = (
        b"garbage line without a colon\n"
        b"retry: 10\n"
        b"data: " + EVENTS[0].encode() + b"\n\n"
        b"id: 7\nevent: message\ndata: " + EVENTS[1].encode() + b"\n\n"
        b"data: [DONE]\n\n"
    )

    async def source() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 7):
            yield body[i : i + 7]

    fake.queue(streaming(source()))
    lines = frames(client.post("/v1/chat/completions", json=chat(stream=True)).text)
    assert lines == [*EVENTS, "[DONE]"]

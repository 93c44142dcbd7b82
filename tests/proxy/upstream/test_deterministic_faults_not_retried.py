"""Upstream faults that the same request would meet again are not retried, on a real socket: an unasked protocol
switch, an answer head with more headers than the proxy reads, and a connection cut after the answer began each
cost one upstream call (the first two a 502 upstream_protocol_error that says the upstream answered badly, not
that it failed before answering). A connection lost before any answer is still retried."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from contextlift.proxy import Settings, create_app
from tests.fakes import FakeEmbedder
from tests.serving import chat, raw_upstream

COMPLETION = b'{"id":"c","object":"chat.completion","choices":[]}'


async def post_chat(url: str, **body: Any) -> httpx.Response:
    settings = Settings(upstream_url=url, max_retries=2, retry_backoff=0.0, upstream_timeout=5)
    app = create_app(settings, embedder=FakeEmbedder())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
        async with asyncio.timeout(20):
            response = await client.post("/v1/chat/completions", json=chat(**body))
    await app.state["proxy"].upstream.aclose()
    return response


async def switching_protocols(writer: asyncio.StreamWriter, n: int) -> None:
    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n")


async def too_many_headers(writer: asyncio.StreamWriter, n: int) -> None:
    headers = "".join(f"x-h{i}: {i}\r\n" for i in range(300))
    writer.write(f"HTTP/1.1 200 OK\r\ncontent-length: {len(COMPLETION)}\r\n{headers}\r\n".encode() + COMPLETION)


async def cut_mid_body(writer: asyncio.StreamWriter, n: int) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\r\n" + b'{"id": "')
    await writer.drain()
    await asyncio.sleep(0.05)
    writer.transport.abort()  # a reset, the answer half sent


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("answer", [switching_protocols, too_many_headers], ids=["unasked 101", "300 headers"])
async def test_a_malformed_answer_is_one_call_and_named_as_such(answer: Any, stream: bool) -> None:
    async with raw_upstream(answer) as (url, heads):
        response = await post_chat(url, stream=stream)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_protocol_error"
    assert "before answering" not in error["message"]
    assert "not valid HTTP" in error["message"]
    assert len(heads) == 1
    assert response.headers["x-context-upstream-calls"] == "1"


async def test_a_connection_cut_mid_answer_is_one_call() -> None:
    async with raw_upstream(cut_mid_body) as (url, heads):
        response = await post_chat(url)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_connection_lost"
    assert len(heads) == 1


async def test_a_connection_lost_before_any_answer_is_still_retried() -> None:
    async def hang_up_then_answer(writer: asyncio.StreamWriter, n: int) -> None:
        if n < 2:
            writer.transport.abort()
            return
        writer.write(f"HTTP/1.1 200 OK\r\ncontent-length: {len(COMPLETION)}\r\n\r\n".encode() + COMPLETION)

    async with raw_upstream(hang_up_then_answer) as (url, heads):
        response = await post_chat(url)
    assert response.status_code == 200
    assert len(heads) == 3

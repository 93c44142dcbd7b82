"""`X-Context-Overhead-Ms` is the proxy's own time: from the first byte of the request's head, as the server
received it, minus only the time the upstream held the request's calls (overlapping calls counted once)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.server import build_server
from contextlift.proxy.upstream.ledger import CallLedger
from tests.fakes import FakeEmbedder, FakeUpstream, chunk, completion, sse_body, sse_response
from tests.serving import UPSTREAM, chat, serve_in_thread

UPSTREAM_SECONDS = 0.4


async def slow_completion(request: httpx.Request) -> httpx.Response:
    await asyncio.sleep(UPSTREAM_SECONDS)
    return httpx.Response(200, json=completion())


def test_overlapping_waits_count_once_and_gaps_not_at_all() -> None:
    ledger = CallLedger()
    for start, end in [(0.0, 1.0), (0.5, 1.5), (0.2, 0.4), (3.0, 4.0)]:
        ledger.waited(start, end)
    assert ledger.waited_seconds() == pytest.approx(2.5)
    assert CallLedger().waited_seconds() == 0.0


def test_the_upstream_answering_slowly_is_not_the_proxys_overhead(client: Any, fake: FakeUpstream) -> None:
    fake.queue(slow_completion)
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 200
    assert response.elapsed.total_seconds() >= UPSTREAM_SECONDS
    assert float(response.headers["x-context-overhead-ms"]) < UPSTREAM_SECONDS * 1000 / 2


def test_a_stream_whose_chunks_come_slowly_is_not_the_proxys_overhead(client: Any, fake: FakeUpstream) -> None:
    body = sse_body([chunk("Par"), chunk("is", finish="stop")])
    fake.queue(sse_response(body, split_at=[body.index(b"\n\n") + 2], delay=UPSTREAM_SECONDS / 2))
    with client.stream("POST", "/v1/chat/completions", json=chat(stream=True)) as response:
        body = b"".join(response.iter_bytes())
    assert b"Par" in body
    assert float(response.headers["x-context-overhead-ms"]) < UPSTREAM_SECONDS * 1000 / 2


@pytest.fixture
def serve(fake: FakeUpstream) -> Iterator[Callable[[], int]]:
    with contextlib.ExitStack() as running:

        def start() -> int:
            settings = Settings(upstream_url=UPSTREAM, retry_backoff=0.0, shutdown_grace=1.0)
            app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
            port, _ = running.enter_context(serve_in_thread(build_server(app, settings)))
            return port

        yield start


def test_the_clock_starts_with_the_first_byte_the_server_received(serve: Callable[[], int]) -> None:
    port = serve()
    body = json.dumps(chat()).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: proxy\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head[:20])
        time.sleep(UPSTREAM_SECONDS)
        conn.sendall(head[20:] + body)
        answer = b""
        while piece := conn.recv(65536):
            answer += piece
    headers = dict(
        line.split(": ", 1) for line in answer.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")[1:] if ": " in line
    )
    assert answer.startswith(b"HTTP/1.1 200")
    assert float(headers["x-context-overhead-ms"]) >= UPSTREAM_SECONDS * 1000

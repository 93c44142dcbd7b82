"""Overload gets a fast 503; a client that leaves cancels its upstream calls within a second (plain, streamed,
medoid, fact) and is logged with status 499. (Oversized heads are the server's to refuse, before any route:
test_http_layer.py.)"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import structlog

from contextlift.proxy import Settings, create_app
from contextlift.proxy.observability.logs import configure_logging
from tests.fakes import FakeEmbedder, FakeUpstream, chunk
from tests.serving import UPSTREAM, chat

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is true" for i in range(1, 4))
WITH_DOCS: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": f"{DOCS}\n\nQuestion: which fact?\nAnswer:"}],
}


async def test_requests_over_the_in_flight_limit_get_a_fast_503() -> None:
    fake = FakeUpstream()
    release = asyncio.Event()
    arrived = asyncio.Event()

    async def held(request: httpx.Request) -> httpx.Response:
        if len(fake.requests) == 2:
            arrived.set()
        await release.wait()
        return httpx.Response(200, json={"choices": []})

    fake.queue(held, held)
    settings = Settings(upstream_url=UPSTREAM, max_in_flight=2)
    app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
    clients = [Disconnecting(chat(), "none") for _ in range(3)]
    async with asyncio.timeout(10):
        held_requests = [asyncio.ensure_future(app(c.scope(), c.receive, c.send)) for c in clients[:2]]  # type: ignore[arg-type]
        await arrived.wait()
        started = time.monotonic()
        await app(clients[2].scope(), clients[2].receive, clients[2].send)  # type: ignore[arg-type]
        assert time.monotonic() - started < 0.5
        release.set()
        await asyncio.gather(*held_requests)
    refused_start, refused_body = clients[2].sent[0], clients[2].sent[1]
    assert refused_start["status"] == 503
    assert (b"retry-after", b"1") in refused_start["headers"]
    assert json.loads(refused_body["body"])["error"]["code"] == "overloaded"
    assert [c.sent[0]["status"] for c in clients[:2]] == [200, 200]
    assert len(fake.requests) == 2


class Disconnecting:
    """Drives the app over raw ASGI: sends the body, then disconnects when told."""

    def __init__(self, body: dict[str, Any], strategy: str) -> None:
        self.payload = json.dumps(body).encode()
        self.strategy = strategy.encode()
        self.gone = asyncio.Event()
        self.sent: list[dict[str, Any]] = []
        self._body_sent = False

    async def receive(self) -> dict[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self.payload, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        if self.gone.is_set():
            raise OSError("client went away")
        self.sent.append(message)

    def scope(self) -> dict[str, Any]:
        return {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
            "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"",
            "root_path": "", "client": ("127.0.0.1", 1), "server": ("testserver", 80), "state": {},
            "headers": [(b"content-type", b"application/json"), (b"x-context-strategy", self.strategy),
                        (b"content-length", str(len(self.payload)).encode())],
        }  # fmt: skip


async def _hang_until_cancelled(cancelled: list[float]) -> None:
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        cancelled.append(time.monotonic())
        raise


@pytest.mark.parametrize(
    ("body", "strategy", "calls"),
    [
        (chat(), "none", 1),
        (chat(stream=True), "none", 1),
        (WITH_DOCS, "medoid; k=3", 3),
        ({**WITH_DOCS, "stream": True}, "medoid; k=3", 3),
        (WITH_DOCS, "fact", 1),
        ({**WITH_DOCS, "stream": True}, "recite", 1),
    ],
    ids=["plain", "streamed", "medoid", "medoid-streamed", "fact", "recite-streamed"],
)
async def test_disconnect_cancels_every_upstream_call_within_a_second(
    body: dict[str, Any], strategy: str, calls: int
) -> None:
    fake = FakeUpstream()
    cancelled: list[float] = []

    async def hang(request: httpx.Request) -> httpx.Response:
        if body.get("stream") and strategy == "none":

            async def events() -> AsyncIterator[bytes]:
                yield f"data: {chunk('first')}\n\n".encode()
                await _hang_until_cancelled(cancelled)
                yield b""

            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())
        await _hang_until_cancelled(cancelled)
        raise AssertionError("not reached")

    fake.queue(*[hang] * calls)
    logs = io.StringIO()
    configure_logging("json", "info", stream=logs)
    try:
        app = create_app(Settings(upstream_url=UPSTREAM), transport=fake.transport(), embedder=FakeEmbedder())
        client = Disconnecting(body, strategy)
        async with asyncio.timeout(10):
            handling = asyncio.ensure_future(app(client.scope(), client.receive, client.send))  # type: ignore[arg-type]
            while len(fake.requests) < calls:  # noqa: ASYNC110 - the fake offers no event to wait on
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            left = time.monotonic()
            client.gone.set()
            await asyncio.gather(handling, return_exceptions=True)
            await asyncio.sleep(0.05)
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers.clear()
    assert len(cancelled) == calls
    assert all(at - left < 1.0 for at in cancelled)
    summaries = [json.loads(line) for line in logs.getvalue().splitlines() if '"event": "request"' in line]
    assert [s["status"] for s in summaries] == [499]

"""A client that leaves its answer unread, at the socket level: one that stops reading a stream is dropped after
`client_write_timeout` and its upstream call closed; a connection whose whole answer sits unread gives up its place
(under `max_connections`) rather than hold it until the client reads."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream, chunk, completion
from tests.proxy.edge.test_http_layer import TIMEOUT, chat_request, serve, served_within
from tests.serving import chat

__all__ = ["serve"]  # the fixture, shared with the HTTP layer's other tests


def unread_chat(port: int, body: dict[str, Any]) -> socket.socket:
    """A connection that sent a chat request and will not read its answer: its 4 KiB receive buffer fills at once."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(chat_request(body))
    return sock


def test_a_client_that_stops_reading_a_stream_is_dropped_and_its_upstream_call_closed(
    serve: Any, fake: FakeUpstream
) -> None:
    closed = threading.Event()

    def endless(request: httpx.Request) -> httpx.Response:
        async def events() -> AsyncIterator[bytes]:
            try:
                while True:
                    yield f"data: {chunk('x' * 60_000)}\n\n".encode()
                    await asyncio.sleep(0)
            finally:
                closed.set()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())

    fake.queue(endless)
    with unread_chat(serve(client_write_timeout=0.5), {**chat("go"), "stream": True}):
        # Never read: the proxy's buffers fill, it stops writing, and after client_write_timeout it lets go.
        assert closed.wait(15), "the upstream stream was still open: the request outlived a client that never reads"


@pytest.mark.parametrize(
    ("client_write_timeout", "within"),
    [(0.5, 3.0), (5.0, TIMEOUT + 1.5)],
    ids=["after-the-client-write-timeout", "when-its-keep-alive-ends"],
)
def test_a_connection_whose_whole_answer_sits_unread_is_dropped(
    serve: Any, fake: FakeUpstream, client_write_timeout: float, within: float
) -> None:
    # A close would wait for the client to read the answer, and the connection would hold its place for good
    # (max_connections=1: every other client 503). The whole answer written, the sooner of the client write timeout
    # and the keep-alive time lets it go.
    fake.queue(httpx.Response(200, json=completion("x" * 3_000_000)))
    port = serve(max_connections=1, header_read_timeout=5, client_write_timeout=client_write_timeout)
    with unread_chat(port, chat("go")):
        assert served_within(port, within), "the unread connection still held the only place"

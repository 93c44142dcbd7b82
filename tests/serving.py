"""What tests share besides fixtures: serving an app on a loopback port in a thread, for tests that need a real
socket (clients that speak HTTP, servers under test, fake upstreams that a separate process calls), so every test
starts and stops its servers the same way; the fake upstream's base URL; a minimal chat body. Fixtures live in
conftest.py, which nothing imports from."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import uvicorn

STARTUP_SECONDS = 10.0
SHUTDOWN_SECONDS = 5.0
UPSTREAM = "http://upstream.test/v1"
"""The base URL the proxy under test is given; a fake transport answers for it."""


@contextlib.contextmanager
def serve_in_thread(server: uvicorn.Server) -> Iterator[tuple[int, threading.Thread]]:
    """Run `server` on a free 127.0.0.1 port in a daemon thread; yields the port and the thread, and asks the
    server to exit when the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while not server.started:
            assert thread.is_alive(), "the server stopped while starting"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        yield int(listener.getsockname()[1]), thread
    finally:
        server.should_exit = True
        thread.join(SHUTDOWN_SECONDS)
        if thread.is_alive():
            # uvicorn waits for every running handler before it stops, and a fake upstream that stalls on purpose
            # never returns: the server outlived its test and the run, its sockets left for the last collection
            # (a whole-suite run failed at exit on one). Forcing the exit cancels the handlers.
            server.force_exit = True
            thread.join(SHUTDOWN_SECONDS)
        listener.close()
        assert not thread.is_alive(), "the server did not stop"


@contextlib.contextmanager
def fake_upstream_url(app: Any) -> Iterator[str]:
    """A fake upstream ASGI app served on loopback; yields its OpenAI-style base URL (`.../v1`)."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="error"))
    with serve_in_thread(server) as (port, _):
        yield f"http://127.0.0.1:{port}/v1"


async def request_body(receive: Any) -> bytes:
    """The whole body of a request to a fake upstream ASGI app."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


MOUNTAINS = (
    "Answer from the documents.\n\n"
    "Document [1](Title: K2) K2 lies in the Karakoram range.\n"
    "Document [2](Title: Danube) The Danube flows through ten countries.\n"
    "Document [3](Title: Mont Blanc) Mont Blanc is the highest mountain in the Alps.\n\n"
    "Question: What is the highest mountain in the Alps?"
)
"""The README's quick-start prompt: three documents in Lost in the Middle's format, the answer in the last; `reorder`
moves it first (3,1,2)."""


def chat(content: str = "What is the capital of France?", **extra: Any) -> dict[str, Any]:
    """A minimal chat-completions body."""
    return {"model": "fake-model", "messages": [{"role": "user", "content": content}], **extra}


RawAnswer = Callable[[asyncio.StreamWriter, int], Awaitable[None]]
"""Writes whatever bytes the scripted socket answers the n-th request (from 0) with."""


@contextlib.asynccontextmanager
async def raw_upstream(answer: RawAnswer) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A fake upstream on a loopback socket that answers each request with the bytes `answer` writes (any bytes:
    a malformed head, a reset, a trickle); yields its base URL (`.../v1`) and the request heads it received, one
    per upstream call."""
    heads: list[bytes] = []
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                heads.append(head)
                lines = head.lower().split(b"\r\n")
                lengths = [line.split(b":", 1)[1] for line in lines if line.startswith(b"content-length:")]
                await reader.readexactly(int(lengths[0]) if lengths else 0)
                await answer(writer, len(heads) - 1)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", heads
    finally:
        server.close()
        for writer in writers:  # a trickling answer would otherwise outlive its test
            writer.transport.abort()

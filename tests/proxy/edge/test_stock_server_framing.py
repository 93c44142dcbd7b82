"""How the stock server (uvicorn's h11 protocol, as released) frames what a client sends, at the socket level, and
what the proxy's bounds around it keep: pipelined requests answered in order, never one inside another; trailers
that never join a request's headers and are bounded; a body answered early ending its connection; a client that
hangs up having its upstream call cancelled, whatever its body's size. (Bytes that are not HTTP, heads' bounds and
Content-Length with Transfer-Encoding: test_http_layer.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream, chunk, completion
from tests.proxy.edge.test_http_layer import chat_request, connect, get, serve
from tests.serving import chat

__all__ = ["serve"]  # the fixture, shared with the HTTP layer's other tests


class OneReader:
    """A socket's one buffered reader, for `http.client.HTTPResponse` to read answers from in turn: each response
    would otherwise buffer its own reader and take the start of the next pipelined answer with it."""

    def __init__(self, sock: socket.socket) -> None:
        self._file = sock.makefile("rb")

    def makefile(self, mode: str) -> OneReader:
        return self

    def close(self) -> None:
        """Kept open for the next answer: the socket's owner closes it."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


def next_answer(reader: OneReader, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    response = http.client.HTTPResponse(reader, method=method)  # type: ignore[arg-type]
    response.begin()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()


def read_until_closed(sock: socket.socket, seconds: float = 3) -> bytes:
    """Everything the server sends until it closes (or drops) the connection; a TimeoutError if it keeps it open."""
    sock.settimeout(seconds)
    received = b""
    with contextlib.suppress(ConnectionResetError):
        while piece := sock.recv(65536):
            received += piece
    return received


def content(body: bytes) -> str:
    return str(json.loads(body)["choices"][0]["message"]["content"])


def test_pipelined_requests_are_answered_in_order_on_one_connection(serve: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=completion("first")), httpx.Response(200, json=completion("second")))
    head = b"HEAD /healthz HTTP/1.1\r\nHost: proxy.test\r\n\r\n"  # an answer with no body between two with one
    with connect(serve()) as sock:
        sock.sendall(chat_request(chat("one")) + head + chat_request(chat("two")) + get())
        reader = OneReader(sock)
        status, _, body = next_answer(reader)
        assert (status, content(body)) == (200, "first")
        assert next_answer(reader, "HEAD")[::2] == (405, b"")  # the route answers GET only
        status, _, body = next_answer(reader)
        assert (status, content(body)) == (200, "second")
        assert next_answer(reader)[::2] == (200, b'{"status":"ok"}')
    assert [body["messages"][0]["content"] for body in fake.bodies] == ["one", "two"]


def test_a_malformed_request_pipelined_behind_a_stream_is_refused_after_it_never_inside_it(
    serve: Any, fake: FakeUpstream
) -> None:
    events = b"".join(f"data: {chunk(word)}\n\n".encode() for word in ["a", "b", "c"]) + b"data: [DONE]\n\n"
    fake.queue(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events))
    with connect(serve()) as sock:
        sock.sendall(chat_request({**chat("go"), "stream": True}) + b"\x16\x03\x01 not http\r\n\r\n" + get())
        reader = OneReader(sock)
        status, _, body = next_answer(reader)
        assert status == 200
        assert body.endswith(b"data: [DONE]\n\n")  # whole, and nothing written into it
        assert next_answer(reader)[::2] == (400, b"Invalid HTTP request received.")
        assert read_until_closed(sock) == b""  # the request after the garbage is never read
    assert len(fake.requests) == 1


def chunked_chat(trailers: list[str]) -> bytes:
    raw = json.dumps(chat("with trailers")).encode()
    head = ["POST /v1/chat/completions HTTP/1.1", "Host: proxy.test", "Content-Type: application/json",
            "Authorization: Bearer from-the-head", "Transfer-Encoding: chunked"]  # fmt: skip
    body = b"%x\r\n" % len(raw) + raw + b"\r\n0\r\n" + "".join(f"{t}\r\n" for t in trailers).encode() + b"\r\n"
    return "\r\n".join([*head, "", ""]).encode() + body


def test_trailers_never_join_the_request_headers(serve: Any, fake: FakeUpstream) -> None:
    # A header `X-Context-Strategy: repeat` would double the prompt upstream and name itself in the answer.
    trailers = ["Authorization: Bearer from-a-trailer", "X-Context-Strategy: repeat", "X-Trailer: 1"]
    with connect(serve()) as sock:
        sock.sendall(chunked_chat(trailers))
        status, headers, _ = next_answer(OneReader(sock))
    assert (status, headers["x-context-strategy"]) == (200, "none")
    [sent] = fake.requests
    assert sent.headers.get_list("authorization") == ["Bearer from-the-head"]
    assert "x-trailer" not in sent.headers
    assert fake.bodies[0]["messages"] == chat("with trailers")["messages"]


@pytest.mark.parametrize(
    "trailed_body",
    [
        pytest.param(chunked_chat([f"X-T{i}: {'a' * 1000}" for i in range(200)]), id="200-kb-of-trailers"),
        pytest.param(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"1\r\na\r\n" * 20_000  # many small chunks earn a trailer no room
            + b"0\r\nX-T: "
            + b"a" * 300_000,
            id="after-many-small-chunks",
        ),
    ],
)
def test_trailers_past_the_bound_refuse_the_connection(serve: Any, fake: FakeUpstream, trailed_body: bytes) -> None:
    with connect(serve(max_header_bytes=8192)) as sock:  # h11's bound on a trailer section: 16 KiB
        with contextlib.suppress(OSError):  # refused while still sending: the point
            sock.sendall(trailed_body)
        received = read_until_closed(sock)
    # uvicorn's 400, unless the reset of a close with bytes unread destroyed it first.
    assert received == b"" or received.startswith(b"HTTP/1.1 400 ")
    assert fake.requests == []


@pytest.mark.parametrize(
    ("head", "status"),
    [
        pytest.param(b"POST /no-such-route HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 5\r\n\r\n", 404, id="404"),
        pytest.param(get("/healthz", "Transfer-Encoding: chunked") + b"5\r\nhel", 200, id="chunked"),
        pytest.param(
            b"POST /healthz HTTP/1.1\r\nHost: proxy.test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
            405,
            id="awaiting-100-continue",
        ),
    ],
)
def test_a_body_answered_early_ends_the_connection_after_the_answer(
    serve: Any, fake: FakeUpstream, head: bytes, status: int
) -> None:
    """Nobody reads the rest of that body: kept alive, the connection would read it as the next request's start."""
    with connect(serve(keepalive_timeout=5)) as sock:
        sock.sendall(head)
        answered, headers, _ = next_answer(OneReader(sock))
        assert (answered, headers["connection"]) == (status, "close")
        with contextlib.suppress(OSError):
            sock.sendall(b"lo\r\n0\r\n\r\n" + get("/v1/models"))  # the body's rest, and a request behind it
        assert read_until_closed(sock) == b""
    assert fake.requests == []


def test_a_malformed_chunk_gets_the_servers_400_and_nothing_is_logged_as_an_error(
    serve: Any, fake: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    # The chat route asks for the body, so uvicorn writes `100 Continue` before the bad chunk line is read.
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"
    )
    with connect(serve()) as sock:
        sock.sendall(head)
        received = read_until_closed(sock)
    assert b"HTTP/1.1 400 " in received
    assert fake.requests == []
    time.sleep(0.2)  # the app's end of the request, after the close
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


def hung_upstream(fake: FakeUpstream) -> threading.Event:
    """Queues an upstream answer that never comes; the event is set when its call is cancelled."""
    cancelled = threading.Event()

    async def hang(_: httpx.Request) -> httpx.Response:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return httpx.Response(200, json=completion())

    fake.queue(hang)
    return cancelled


def upstream_called(fake: FakeUpstream) -> bool:
    deadline = time.monotonic() + 5
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(fake.requests)


def test_a_client_that_hangs_up_has_its_upstream_call_cancelled(serve: Any, fake: FakeUpstream) -> None:
    cancelled = hung_upstream(fake)
    with connect(serve()) as sock:
        sock.sendall(chat_request(chat("wait")))
        assert upstream_called(fake)
    assert cancelled.wait(1)


def test_a_client_that_hangs_up_after_a_body_over_64_kib_has_its_upstream_call_cancelled(
    serve: Any, fake: FakeUpstream
) -> None:
    cancelled = hung_upstream(fake)
    request = chat_request(chat("q" * 150_000), "Expect: 100-continue")  # as curl sends a large body
    head, _, body = request.partition(b"\r\n\r\n")
    with connect(serve()) as sock:
        sock.sendall(head + b"\r\n\r\n")
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"  # written once the app waits for the body
        sock.sendall(body)  # in one write: the app gets it whole
        assert upstream_called(fake)
    assert cancelled.wait(1)

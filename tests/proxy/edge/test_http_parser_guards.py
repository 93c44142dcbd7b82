"""What llhttp (the server's parser) leaves to the server, each found by a hostile review of an httptools build
and probed here at the socket level: pipelined requests (parsed all at once by llhttp: a refusal landed inside
an earlier answer, the queue grew without bound), protocol switches (llhttp skips the body of an upgrade or
`CONNECT` request, which ran as a request of its own), chunked trailers (merged into the request's headers, and
unbounded), request lines without a version (run as HTTP/0.9 with headers and a body), heads measured from the
wrong byte, the request after a body its answer did not wait for (dropped unanswered by a first guard), a body
owed after its answer with no clock, and `Host`."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import time
from typing import Any, cast

import httpx
import pytest
from uvicorn.server import ServerState

from contextlift.proxy.edge.http_protocol import GuardedConfig, GuardedHttpProtocol, HttpLimits, _HeadWithBody
from tests.fakes import FakeUpstream, chunk, completion
from tests.proxy.edge.test_http_layer import closed_within, connect, get, read_answer, refused, serve
from tests.serving import chat

__all__ = ["serve"]  # the fixture, shared with the HTTP layer's other tests


def chat_request(body: dict[str, Any], *headers: str) -> bytes:
    raw = json.dumps(body).encode()
    head = ["POST /v1/chat/completions HTTP/1.1", "Host: proxy.test", "Content-Type: application/json", *headers]
    return "\r\n".join([*head, f"Content-Length: {len(raw)}", "", ""]).encode() + raw


def read_all(sock: socket.socket, seconds: float = 5) -> bytes:
    """Everything the server sends until it closes (or drops) the connection."""
    sock.settimeout(seconds)
    received = b""
    try:
        while chunk_ := sock.recv(65536):
            received += chunk_
    except ConnectionResetError:
        pass
    return received


def test_a_request_pipelined_behind_another_is_not_read_and_the_connection_closes_after_the_answer(
    serve: Any, fake: FakeUpstream
) -> None:
    fake.queue(httpx.Response(200, json=completion("first")))
    with connect(serve()) as sock:
        sock.sendall(chat_request(chat("first")) + chat_request(chat("second")))
        assert read_answer(sock).status == 200
        assert closed_within(sock, 2)
    assert len(fake.requests) == 1  # the second never ran


def test_a_malformed_request_pipelined_behind_a_stream_never_lands_inside_it(serve: Any, fake: FakeUpstream) -> None:
    events = b"".join(f"data: {chunk(word)}\n\n".encode() for word in ["a", "b", "c"]) + b"data: [DONE]\n\n"
    fake.queue(httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events))
    with connect(serve()) as sock:
        sock.sendall(chat_request({**chat("go"), "stream": True}) + b"\x16\x03\x01 not http\r\n\r\n" + get())
        received = read_all(sock)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert b"data: [DONE]" in body
    assert received.count(b"HTTP/1.1") == 1  # one answer: no refusal written after or inside it
    assert b"malformed_http" not in received


def test_a_flood_of_pipelined_requests_is_dropped_unread(serve: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=completion("first")))
    flood = get("/v1/models") * 5_000  # 0.2 MB of requests behind the first, in the same write
    with connect(serve()) as sock:
        sock.sendall(chat_request(chat("first")) + flood)
        assert read_answer(sock).status == 200
        assert closed_within(sock, 3)
    assert len(fake.requests) == 1


def test_connect_is_refused_and_what_follows_it_never_runs(serve: Any, fake: FakeUpstream) -> None:
    with connect(serve()) as sock:
        sock.sendall(b"CONNECT proxy.test:443 HTTP/1.1\r\nHost: proxy.test:443\r\n\r\n" + chat_request(chat("x")))
        refused(sock, 400, "malformed_http")
    time.sleep(0.2)
    assert fake.requests == []


def test_an_upgrade_offer_with_a_body_is_refused_and_the_body_never_runs_as_a_request(
    serve: Any, fake: FakeUpstream
) -> None:
    hidden = chat_request(chat("smuggled"))
    head = ["GET /healthz HTTP/1.1", "Host: proxy.test", "Connection: Upgrade", "Upgrade: foo"]
    with connect(serve()) as sock:
        sock.sendall("\r\n".join([*head, f"Content-Length: {len(hidden)}", "", ""]).encode() + hidden)
        refused(sock, 400, "malformed_http")
    time.sleep(0.2)
    assert fake.requests == []


def test_a_bodyless_upgrade_offer_is_answered_as_http_1_1_and_nothing_after_it_is_read(
    serve: Any, fake: FakeUpstream
) -> None:
    # What curl --http2 sends to an http:// URL: the offer may be ignored (RFC 9110, 7.8).
    offer = get("/healthz", "Connection: Upgrade, HTTP2-Settings", "Upgrade: h2c", "HTTP2-Settings: AAMAAABkAAQAAP__")
    with connect(serve()) as sock:
        sock.sendall(offer + chat_request(chat("after the offer")))
        assert read_answer(sock).status == 200
        assert closed_within(sock, 2)
    time.sleep(0.2)
    assert fake.requests == []


def chunked_chat(trailers: list[str]) -> bytes:
    raw = json.dumps(chat("with trailers")).encode()
    head = ["POST /v1/chat/completions HTTP/1.1", "Host: proxy.test", "Content-Type: application/json",
            "Authorization: Bearer from-the-head", "Transfer-Encoding: chunked"]  # fmt: skip
    body = b"%x\r\n" % len(raw) + raw + b"\r\n0\r\n" + "".join(f"{t}\r\n" for t in trailers).encode() + b"\r\n"
    return "\r\n".join([*head, "", ""]).encode() + body


def test_trailers_never_join_the_request_headers(serve: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=completion("ok")))
    with connect(serve()) as sock:
        sock.sendall(chunked_chat(["Authorization: Bearer from-a-trailer", "X-Trailer: 1"]))
        assert read_answer(sock).status == 200
    [sent] = fake.requests
    assert sent.headers.get_list("authorization") == ["Bearer from-the-head"]
    assert "x-trailer" not in sent.headers


def test_trailers_past_the_bound_drop_the_connection(serve: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=completion("ok")))
    with connect(serve(max_header_bytes=8192)) as sock:
        with contextlib.suppress(OSError):  # dropped while still sending: the point
            sock.sendall(chunked_chat([f"X-T{i}: {'a' * 1000}" for i in range(200)]))  # 200 KB of trailers
        received = read_all(sock)
    assert b"HTTP/1.1 200" not in received
    assert fake.requests == []


def test_a_versionless_chat_request_with_headers_and_body_never_runs(serve: Any, fake: FakeUpstream) -> None:
    versionless = chat_request(chat("versionless")).replace(b" HTTP/1.1\r\n", b"\r\n", 1)
    with connect(serve()) as sock:
        sock.sendall(versionless)
        refused(sock, 400, "malformed_http")
    assert fake.requests == []


def test_blank_lines_before_a_head_do_not_hide_its_size(serve: Any) -> None:
    with connect(serve(max_header_bytes=8192)) as sock:
        sock.sendall(b"\r\n\r\n" + get("/healthz", f"X-Big: {'a' * 50_000}"))
        refused(sock, 431, "headers_too_large")


def test_the_request_after_a_body_its_answer_did_not_wait_for_is_served(serve: Any) -> None:
    # The body's last bytes and the client's next request in one read, the body's answer already out.
    with connect(serve(max_header_bytes=8192)) as sock:
        sock.sendall(get("/healthz", "Content-Length: 10"))
        assert read_answer(sock).status == 200  # answered before its body came
        sock.sendall(b"0123456789" + get())
        assert read_answer(sock).status == 200
        sock.sendall(get())  # and the connection lives on
        assert read_answer(sock).status == 200


def test_a_head_after_a_body_its_answer_did_not_wait_for_is_measured_from_its_first_byte(serve: Any) -> None:
    with connect(serve(max_header_bytes=8192)) as sock:
        sock.sendall(get("/healthz", "Content-Length: 10"))
        assert read_answer(sock).status == 200
        sock.sendall(b"0123456789" + get("/healthz", f"X-Big: {'a' * 50_000}"))
        refused(sock, 431, "headers_too_large")


def test_a_chunked_body_answered_early_ends_the_connection_after_the_answer(serve: Any) -> None:
    # Where a chunked body ends in a read is the parser's to know: no head after it could be measured.
    with connect(serve(keepalive_timeout=5)) as sock:
        sock.sendall(get("/healthz", "Transfer-Encoding: chunked") + b"5\r\nhello\r\n")
        assert read_answer(sock).status == 200
        assert closed_within(sock, 2)


def test_a_body_awaiting_100_continue_answered_early_ends_the_connection(serve: Any, fake: FakeUpstream) -> None:
    # The client may drop the body after a final answer: its next request must not be cut at Content-Length.
    with connect(serve(keepalive_timeout=5)) as sock:
        sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: proxy.test\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
        assert read_answer(sock).status == 405
        with contextlib.suppress(OSError):
            sock.sendall(b"XXXXX" + get("/v1/models"))
        assert read_all(sock) == b""
    assert fake.requests == []


def test_blank_lines_before_a_head_count_toward_its_size(serve: Any) -> None:
    with connect(serve(max_header_bytes=8192, header_read_timeout=5)) as sock:
        for _ in range(10):
            sock.sendall(b"\r\n" * 500)
            time.sleep(0.01)
        refused(sock, 431, "headers_too_large")


def test_trailers_that_end_the_message_in_one_read_are_bounded_too(serve: Any, fake: FakeUpstream) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy.test\r\nContent-Type: application/json\r\n"
    head += b"Transfer-Encoding: chunked\r\n\r\n"
    raw = json.dumps(chat("x")).encode()
    with connect(serve(max_header_bytes=8192)) as sock:
        sock.sendall(head + b"%x\r\n" % len(raw) + raw + b"\r\n")
        time.sleep(0.2)
        with contextlib.suppress(OSError):
            sock.sendall(b"0\r\nX-T: " + b"a" * 9_000 + b"\r\n\r\n")  # one read, past the 8 KiB bound
        assert read_all(sock) == b""  # dropped, no answer
    assert fake.requests == []


def test_the_rest_of_a_body_an_answer_did_not_wait_for_has_the_keep_alive_time_in_all(serve: Any) -> None:
    with connect(serve(keepalive_timeout=0.5)) as sock:
        sock.sendall(get("/healthz", "Content-Length: 100"))
        assert read_answer(sock).status == 200
        started = time.monotonic()
        for _ in range(8):  # a byte every 0.2 s: each would stop a per-byte clock
            with contextlib.suppress(OSError):
                sock.sendall(b"x")
            time.sleep(0.2)
        assert closed_within(sock, 2)
        assert time.monotonic() - started < 3


def test_a_trailer_that_says_close_closes_the_connection_after_the_answer(serve: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=completion("ok")))
    with connect(serve(keepalive_timeout=5)) as sock:
        sock.sendall(chunked_chat(["Connection: close"]))
        assert read_answer(sock).status == 200
        assert closed_within(sock, 2)  # rather than a later request swallowed unread until a 408


def test_many_small_chunks_earn_no_room_for_a_large_trailer(serve: Any, fake: FakeUpstream) -> None:
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy.test\r\nTransfer-Encoding: chunked\r\n\r\n"
    with connect(serve(max_header_bytes=8192)) as sock:
        with contextlib.suppress(OSError):
            sock.sendall(head + b"1\r\na\r\n" * 20_000 + b"0\r\nX-T: " + b"a" * 300_000)
        assert read_all(sock) == b""  # dropped, no answer
    assert fake.requests == []


def test_an_http_1_1_request_needs_exactly_one_host(serve: Any, fake: FakeUpstream) -> None:
    for request in [b"GET /v1/models HTTP/1.1\r\n\r\n", get("/v1/models", "Host: other.test")]:
        with connect(serve()) as sock:
            sock.sendall(request)
            refused(sock, 400, "malformed_http")
    assert fake.requests == []


def test_a_client_that_hangs_up_has_its_upstream_call_cancelled_by_the_server(serve: Any, fake: FakeUpstream) -> None:
    """The server tells the route the connection is lost (a future in the scope, no task reading `receive`)."""
    cancelled = threading.Event()

    async def hang(_: httpx.Request) -> httpx.Response:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return httpx.Response(200, json=completion())

    fake.queue(hang)
    with connect(serve()) as sock:
        sock.sendall(chat_request(chat("wait")))
        deadline = time.monotonic() + 5
        while not fake.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fake.requests
    assert cancelled.wait(1)


class _Written:
    """A transport that records each write, for `_HeadWithBody`."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def abort(self) -> None:
        self.closing = True

    def get_write_buffer_size(self) -> int:
        return 0


async def test_a_head_goes_out_with_its_body_in_one_write_or_alone_at_the_end_of_the_turn() -> None:
    loop = asyncio.get_running_loop()
    whole, streamed, closed, aborted = _Written(), _Written(), _Written(), _Written()
    one = _HeadWithBody(cast(asyncio.Transport, whole), loop)
    one.write(b"HEAD ")
    one.write(b"body")
    one.write(b" more")
    assert whole.writes == [b"HEAD body", b" more"]
    stream = _HeadWithBody(cast(asyncio.Transport, streamed), loop)
    stream.write(b"HEAD ")
    assert streamed.writes == []
    await asyncio.sleep(0)  # the turn ends: the head goes alone, once
    assert streamed.writes == [b"HEAD "]
    stream.write(b"chunk")
    assert streamed.writes == [b"HEAD ", b"chunk"]
    closing = _HeadWithBody(cast(asyncio.Transport, closed), loop)
    closing.write(b"HEAD ")
    closing.close()  # what was held goes before the close
    assert closed.writes == [b"HEAD "]
    assert closed.closing
    continued = _Written()
    interim = _HeadWithBody(cast(asyncio.Transport, continued), loop)
    interim.write(b"HTTP/1.1 100 Continue\r\n\r\n")  # goes at once, and is not the head held
    interim.write(b"HEAD ")
    interim.write(b"body")
    interim.seal()  # the connection ends: what comes after is dropped
    interim.write(b"late")
    assert continued.writes == [b"HTTP/1.1 100 Continue\r\n\r\n", b"HEAD body"]
    dropped = _HeadWithBody(cast(asyncio.Transport, aborted), loop)
    dropped.write(b"HEAD ")
    dropped.abort()  # dropped with the connection, never written after it
    await asyncio.sleep(0)
    assert aborted.writes == []
    assert dropped.get_write_buffer_size() == 0  # the rest is the transport's own


def test_a_head_request_kept_alive_gets_its_head_before_the_next_answer(serve: Any, fake: FakeUpstream) -> None:
    """uvicorn writes no body for HEAD: the held head goes when the answer completes (a 405 here, the route
    answering GET only), and the connection serves the next request."""
    with connect(serve()) as sock:
        for _ in range(2):
            sock.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: proxy.test\r\n\r\n")
            response = http.client.HTTPResponse(sock, method="HEAD")
            response.begin()
            assert response.status == 405
            assert response.read() == b""


def test_a_malformed_body_awaiting_100_continue_is_refused_without_a_write_after_the_end(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The app's `receive` writes `100 Continue` after the refusal ended the stream: dropped, not an error logged
    for a write after the end of stream (a review's probe)."""
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"
    )
    with connect(serve()) as sock:
        sock.sendall(head)
        received = read_all(sock, 3)
    assert received.startswith(b"HTTP/1.1 400")
    time.sleep(0.2)
    assert not [r for r in caplog.records if "after write_eof" in r.getMessage() or r.exc_info]


class _Paused(asyncio.Transport):
    """A transport that records whether the protocol has reading paused."""

    def __init__(self) -> None:
        super().__init__()
        self.paused = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name in ("peername", "sockname") else default

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return False

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


async def test_reading_goes_on_once_a_body_over_64_kib_is_whole() -> None:
    """uvicorn stops reading with over 64 KiB of body buffered, until the app next calls `receive`; the route
    waits on the lost-connection future instead, so a hang-up after a large body went unseen until the answer (a
    review's probe: the upstream call ran to upstream_timeout). The last 100 KB come in one read while the app
    waits: reading is on once the body is whole."""
    whole = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        whole.set()
        await asyncio.Event().wait()

    config = GuardedConfig(app, HttpLimits(), lifespan="off", log_config=None)
    config.load()
    protocol = GuardedHttpProtocol(config, ServerState(), {})
    transport = _Paused()
    protocol.connection_made(transport)
    body = b"x" * 100_000
    protocol.data_received(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
    protocol.data_received(body[:10])
    await asyncio.sleep(0.01)  # the app waits for the rest
    protocol.data_received(body[10:])
    await asyncio.wait_for(whole.wait(), 1)
    assert not transport.paused
    protocol.connection_lost(None)

"""The HTTP layer, at the socket level: header and idle timeouts, the connection limit, the header limit, bytes that
are not HTTP refused by the server (uvicorn's own 400) or, where h11 reads a request, by the app in the OpenAI
envelope, and request smuggling refused before the app sees anything. (Clients that leave their answers unread:
test_unread_answers_dropped.py.)"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.server import build_server
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM, chat, serve_in_thread

TIMEOUT = 0.5
"""header_read_timeout and keepalive_timeout in these tests, unless a test needs one of them long."""


@pytest.fixture
def serve(fake: FakeUpstream) -> Iterator[Callable[..., int]]:
    """Starts the proxy under its server on a loopback port in a thread; settings overrides as keywords."""
    with contextlib.ExitStack() as running:

        def start(**overrides: Any) -> int:
            settings = Settings(
                **{
                    "upstream_url": UPSTREAM,
                    "retry_backoff": 0.0,
                    "header_read_timeout": TIMEOUT,
                    "keepalive_timeout": TIMEOUT,
                    "shutdown_grace": 1.0,
                    **overrides,
                }
            )
            app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
            port, _ = running.enter_context(serve_in_thread(build_server(app, settings)))
            return port

        yield start


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def error_code(self) -> str:
        assert self.headers["content-type"] == "application/json"
        return str(json.loads(self.body)["error"]["code"])


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def read_answer(sock: socket.socket) -> Answer:
    response = http.client.HTTPResponse(sock)
    response.begin()
    body = response.read()
    return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, body)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """The server closed the connection (EOF or reset) within `seconds`, sending nothing more."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def refused(sock: socket.socket, status: int, code: str) -> None:
    answer = read_answer(sock)
    assert (answer.status, answer.error_code()) == (status, code)
    assert answer.headers["connection"] == "close"
    assert closed_within(sock, 2)


def refused_by_the_server(sock: socket.socket) -> None:
    """uvicorn's own answer to bytes h11 cannot read as a request (plain text, not the envelope: the request never
    reached the app), and the connection closed."""
    answer = read_answer(sock)
    assert (answer.status, answer.headers["content-type"]) == (400, "text/plain; charset=utf-8")
    assert answer.body == b"Invalid HTTP request received."
    assert answer.headers["connection"] == "close"
    assert closed_within(sock, 2)


def get(path: str = "/healthz", *headers: str) -> bytes:
    return "\r\n".join([f"GET {path} HTTP/1.1", "Host: proxy.test", *headers, "", ""]).encode()


def chat_request(body: dict[str, Any], *headers: str) -> bytes:
    raw = json.dumps(body).encode()
    head = ["POST /v1/chat/completions HTTP/1.1", "Host: proxy.test", "Content-Type: application/json", *headers]
    return "\r\n".join([*head, f"Content-Length: {len(raw)}", "", ""]).encode() + raw


def dribble_until_answered(sock: socket.socket, seconds: float = 3.0) -> float:
    """Sends one header byte every 0.1 s until the server answers; returns the seconds that took."""
    started = time.monotonic()
    sock.sendall(b"X-Slow: ")
    while time.monotonic() - started < seconds:
        if select.select([sock], [], [], 0.1)[0]:
            break
        with contextlib.suppress(OSError):
            sock.sendall(b"a")
    return time.monotonic() - started


def test_a_head_dribbled_byte_by_byte_gets_408_within_the_header_timeout(serve: Any) -> None:
    with connect(serve()) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: proxy.test\r\n")
        assert dribble_until_answered(sock) < TIMEOUT + 1
        refused(sock, 408, "request_timeout")


def test_a_slow_head_after_a_kept_alive_request_gets_408_too(serve: Any) -> None:
    with connect(serve(keepalive_timeout=5)) as sock:
        sock.sendall(get())
        assert read_answer(sock).status == 200
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert dribble_until_answered(sock) < TIMEOUT + 1
        refused(sock, 408, "request_timeout")


def test_a_body_that_stops_halfway_gets_408_after_a_whole_one_on_the_same_connection(
    serve: Any, fake: FakeUpstream
) -> None:
    """The server tells admission when a request's whole body is in (no timer set for it then); the next request on
    the connection starts with its body not in, and its reading is timed again."""
    body = json.dumps(chat()).encode()

    def post(content: bytes) -> bytes:
        head = "POST /v1/chat/completions HTTP/1.1\r\nHost: proxy.test\r\nContent-Type: application/json\r\n"
        return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + content

    with connect(serve(body_read_timeout=0.5, keepalive_timeout=5)) as sock:
        sock.sendall(post(body))
        assert read_answer(sock).status == 200
        started = time.monotonic()
        sock.sendall(post(body[:10]))
        answer = read_answer(sock)
        assert (answer.status, answer.error_code()) == (408, "request_timeout")
        assert time.monotonic() - started < 2
    assert len(fake.requests) == 1


def test_a_header_value_dribbled_in_1_kib_writes_is_refused_once_past_twice_max_header_bytes(serve: Any) -> None:
    """A head that never ends is bounded by the server (h11's incomplete-event size, twice max_header_bytes), not
    by its end: a head between the two gets 431 from the app once it is whole, and this one never is."""
    with connect(serve(header_read_timeout=5)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: proxy.test\r\nX-Big: ")
        sent = 0
        while sent < 100 * 1024 and not select.select([sock], [], [], 0)[0]:
            sock.sendall(b"a" * 1024)
            sent += 1024
            time.sleep(0.005)
        refused_by_the_server(sock)
        assert sent <= 66 * 1024  # 2 x 32 KiB and the request line: refused there, the head still open


def test_a_connection_that_sends_nothing_is_closed_after_the_header_timeout(serve: Any) -> None:
    with connect(serve()) as sock:
        started = time.monotonic()
        assert closed_within(sock, TIMEOUT + 1)
        assert time.monotonic() - started >= TIMEOUT * 0.8


def test_an_idle_kept_alive_connection_is_closed_after_the_keepalive_timeout(serve: Any) -> None:
    with connect(serve(header_read_timeout=5)) as sock:
        sock.sendall(get())
        assert read_answer(sock).status == 200
        started = time.monotonic()
        assert closed_within(sock, TIMEOUT + 1)
        assert time.monotonic() - started >= TIMEOUT * 0.8


def test_a_24_kib_head_arriving_in_two_writes_is_accepted(serve: Any, fake: FakeUpstream) -> None:
    head = get("/v1/models", "X-Pad: " + "p" * 24 * 1024)
    with connect(serve()) as sock:
        sock.sendall(head[:20_000])
        time.sleep(0.05)
        sock.sendall(head[20_000:])
        assert read_answer(sock).status == 200
    assert len(fake.requests) == 1


@pytest.mark.parametrize("writes", [1, 2])
def test_a_40_kib_head_gets_431_and_is_closed(serve: Any, fake: FakeUpstream, writes: int) -> None:
    head = get("/v1/models", "X-Pad: " + "p" * 40 * 1024)
    with connect(serve()) as sock:
        size = len(head) // writes + 1
        for start in range(0, len(head), size):
            sock.sendall(head[start : start + size])
            time.sleep(0.05)
        refused(sock, 431, "headers_too_large")
    assert fake.requests == []


def test_more_headers_than_max_header_count_get_431_on_every_route(serve: Any) -> None:
    with connect(serve(max_header_count=20)) as sock:
        sock.sendall(get("/healthz", *(f"X-H{i}: v" for i in range(21))))
        refused(sock, 431, "headers_too_large")


@pytest.mark.parametrize(
    "headers",
    [[f"X-Filler-{i}: 1" for i in range(120)], ["X-Big: " + "y" * 40_000]],
    ids=["too-many", "too-large"],
)
def test_a_chat_request_with_too_many_or_too_large_headers_gets_431_and_never_goes_upstream(
    serve: Any, fake: FakeUpstream, headers: list[str]
) -> None:
    with connect(serve()) as sock:  # the default limits: 100 headers, 32 KiB
        sock.sendall(chat_request(chat(), *headers))
        refused(sock, 431, "headers_too_large")
    assert fake.requests == []


def served_within(port: int, seconds: float) -> bool:
    """A new connection's `GET /healthz` answered 200 within `seconds` (tried until then)."""
    deadline = time.monotonic() + seconds
    while True:
        with connect(port) as sock:
            sock.sendall(get())
            if read_answer(sock).status == 200:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_cr_only_line_endings_get_408_within_the_header_timeout(serve: Any, fake: FakeUpstream) -> None:
    # h11 looks for a head's end at a LF: with none, the head never ends, and only its deadline answers it.
    with connect(serve()) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /healthz HTTP/1.1\rHost: proxy.test\r\r")
        refused(sock, 408, "request_timeout")
        assert time.monotonic() - started < TIMEOUT + 1
    assert fake.requests == []


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"\x16\x03\x01\x02\x00 not http\r\n\r\n", id="garbage"),
        pytest.param(b"GET\r\n\r\n", id="bad-request-line"),
        pytest.param(b"GET /healthz HTTP/1.1 extra\r\nHost: a\r\n\r\n", id="bad-request-line-tail"),
        pytest.param(get("/healthz", "Bad Header: x"), id="space-in-header-name"),
        pytest.param(get("/healthz", "X-Nul: a\x00b"), id="nul-in-value"),
        pytest.param(b"GET /healthz HTTP/1.1\r\n folded\r\nHost: a\r\n\r\n", id="continuation-line-first"),
        pytest.param(get("/v1/models", "Content-Length: 1", "Content-Length: 2"), id="differing-content-lengths"),
        pytest.param(get("/v1/models", "Content-Length: 1, 2"), id="content-length-list"),
        pytest.param(get("/v1/models", "Content-Length: -1"), id="negative-content-length"),
        pytest.param(get("/v1/models", "Transfer-Encoding: gzip"), id="transfer-encoding-not-chunked"),
        pytest.param(get("/v1/models", "Transfer-Encoding: chunked, chunked"), id="transfer-encoding-twice"),
        pytest.param(get("/v1/models", "Content-Length: +1"), id="signed-content-length"),
        pytest.param(b"GET /v1/models\r\nAuthorization: Bearer a\r\n\r\n", id="no-version"),
        pytest.param(b"GET /v1/models HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", id="http-1.0-two-hosts"),
        pytest.param(b"GET /v1/models HTTP/1.1\r\n\r\n", id="http-1.1-no-host"),
        pytest.param(get("/v1/models", "Host: other.test"), id="http-1.1-two-hosts"),
    ],
)
def test_bytes_h11_cannot_read_as_a_request_get_the_servers_400_and_a_close(
    serve: Any, fake: FakeUpstream, request_bytes: bytes
) -> None:
    with connect(serve()) as sock:
        sock.sendall(request_bytes)
        refused_by_the_server(sock)
    assert fake.requests == []


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GET foo://bar/v1/models HTTP/1.1\r\nHost: a\r\n\r\n", id="absolute-form"),
        pytest.param(b"GET http://u:p@x:1/v1/models?q HTTP/1.1\r\nHost: a\r\n\r\n", id="absolute-form-userinfo"),
        pytest.param(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", id="asterisk-form"),
        pytest.param(b"CONNECT proxy.test:443 HTTP/1.1\r\nHost: proxy.test:443\r\n\r\n", id="authority-form"),
    ],
)
def test_a_target_that_is_not_a_path_gets_the_400_envelope_and_never_goes_upstream(
    serve: Any, fake: FakeUpstream, request_bytes: bytes
) -> None:
    """h11 reads these as requests: the app's canonical-path check answers them, and the connection, kept alive as
    after any answer, is closed when its keep-alive ends."""
    with connect(serve()) as sock:
        sock.sendall(request_bytes)
        answer = read_answer(sock)
        assert (answer.status, answer.error_code()) == (400, "invalid_path")
        assert closed_within(sock, TIMEOUT + 1)
    assert fake.requests == []


def test_a_target_with_a_fragment_is_refused_and_never_goes_upstream(serve: Any, fake: FakeUpstream) -> None:
    with connect(serve()) as sock:
        sock.sendall(b"GET /v1/models#f HTTP/1.1\r\nHost: a\r\n\r\n")
        assert read_answer(sock).status == 400
    assert fake.requests == []


def smuggling(method: str, path: str, length_name: str, encoding_name: str, *, length_first: bool) -> bytes:
    """A request with both Content-Length and Transfer-Encoding whose chunked body ends at once, hiding a second
    request (a chat completion) in what Content-Length calls its body."""
    hidden_body = json.dumps(chat("smuggled")).encode()
    hidden = get("/v1/chat/completions", "Content-Type: application/json", f"Content-Length: {len(hidden_body)}")
    body = b"0\r\n\r\n" + hidden.replace(b"GET", b"POST", 1) + hidden_body
    framing = [f"{length_name}: {len(body)}", f"{encoding_name}: chunked"]
    head = "\r\n".join([f"{method} {path} HTTP/1.1", "Host: proxy.test", *(framing if length_first else framing[::-1])])
    return head.encode() + b"\r\n\r\n" + body


@pytest.mark.parametrize(
    ("method", "path", "length_name", "encoding_name", "length_first"),
    [
        ("POST", "/v1/chat/completions", "Content-Length", "Transfer-Encoding", True),
        ("POST", "/v1/chat/completions", "content-length", "TRANSFER-encoding", False),
        ("POST", "/v1/embeddings", "CONTENT-LENGTH", "transfer-encoding", True),
        ("GET", "/v1/models", "Content-Length", "Transfer-Encoding", False),
        ("GET", "/healthz", "Content-Length", "Transfer-Encoding", True),
    ],
)
def test_content_length_with_transfer_encoding_is_refused_and_the_hidden_request_never_runs(
    serve: Any, fake: FakeUpstream, method: str, path: str, length_name: str, encoding_name: str, length_first: bool
) -> None:
    with connect(serve()) as sock:
        sock.sendall(smuggling(method, path, length_name, encoding_name, length_first=length_first))
        refused(sock, 400, "malformed_http")
    time.sleep(0.2)
    assert fake.requests == []


def test_a_connection_over_max_connections_gets_503_at_once(serve: Any) -> None:
    port = serve(max_connections=2, header_read_timeout=5)
    first, second = connect(port), connect(port)
    with second:
        with first, connect(port) as third:
            started = time.monotonic()
            third.sendall(get())
            answer = read_answer(third)
            assert (answer.status, answer.error_code()) == (503, "overloaded")
            assert (answer.headers["retry-after"], answer.headers["connection"]) == ("1", "close")
            assert closed_within(third, 2)
            assert time.monotonic() - started < 1
            second.sendall(get())  # those within the limit are served
            assert read_answer(second).status == 200
        # `first` is closed now: its place goes to the next connection.
        assert served_within(port, 2), "the place of a closed connection was never given to another"


def test_a_connection_idle_after_a_body_sent_past_its_answer_is_closed_too(serve: Any) -> None:
    with connect(serve(header_read_timeout=5)) as sock:
        sock.sendall(b"POST /no-such-route HTTP/1.1\r\nHost: proxy.test\r\nContent-Length: 5\r\n\r\n")
        assert read_answer(sock).status == 404  # answered before its body was read
        sock.sendall(b"hello")
        assert closed_within(sock, TIMEOUT + 1)

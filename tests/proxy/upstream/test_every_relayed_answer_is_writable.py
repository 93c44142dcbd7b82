"""Every answer the proxy relays is one its server can write, at the socket level: an upstream's answer whose head
the proxy cannot write gets a 502 envelope naming the upstream's fault (where it once got no answer at all, or a
500 blaming the proxy); hop-by-hop headers and those the upstream's `Connection` names stay behind; the operator's
key never travels back in a header's name; a client's repeated header lines reach the upstream as sent; a 405
says what is allowed; a client that cuts its answer is logged as 499.

The upstream is a raw socket on the test's loop, the proxy its real server in a thread, the client httpx."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import structlog.testing

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.server import build_server
from tests.fakes import FakeEmbedder
from tests.serving import chat, raw_upstream, serve_in_thread

KEY = "sk-operator-0123456789"
BODY = b'{"id": "chatcmpl-1", "object": "chat.completion", "choices": []}'


@pytest.fixture(autouse=True)
def _request_lines_logged() -> None:
    """The request's summary line is at info: logged here whatever level an earlier test left the logging at (the
    conftest puts the configuration back after each test)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))


def answer_with(*header_lines: bytes, status: bytes = b"200 OK", body: bytes = BODY) -> Any:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        head = [b"HTTP/1.1 " + status, b"content-type: application/json", b"content-length: %d" % len(body)]
        writer.write(b"\r\n".join([*head, *header_lines]) + b"\r\n\r\n" + body)

    return answer


@contextlib.contextmanager
def proxy_before(url: str, **overrides: Any) -> Iterator[str]:
    settings = Settings(upstream_url=url, upstream_api_key=KEY, max_retries=0, shutdown_grace=1.0, **overrides)
    app = create_app(settings, embedder=FakeEmbedder())
    with serve_in_thread(build_server(app, settings)) as (port, _):
        yield f"http://127.0.0.1:{port}"


@contextlib.asynccontextmanager
async def through_proxy(
    *header_lines: bytes, status: bytes = b"200 OK"
) -> AsyncIterator[tuple[httpx.AsyncClient, list[bytes]]]:
    async with raw_upstream(answer_with(*header_lines, status=status)) as (url, heads):
        with proxy_before(url) as base:
            async with httpx.AsyncClient(base_url=base, timeout=10) as client:
                yield client, heads


UNWRITABLE = [
    pytest.param((b"x-note: a\x00b",), b"200 OK", id="nul-in-a-value"),
    pytest.param((b"x-note: a\x01b",), b"200 OK", id="u0001-in-a-value"),
    pytest.param((b"x-note: a\x7fb",), b"200 OK", id="del-in-a-value"),
    pytest.param((b"x-note : spaced",), b"200 OK", id="space-before-the-colon"),
    pytest.param((b"x-n\xe9te: name-outside-ascii",), b"200 OK", id="name-not-a-token"),
    pytest.param((), b"999 Whatever", id="status-999"),
]


@pytest.mark.parametrize(("lines", "status"), UNWRITABLE)
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "/v1/chat/completions", chat()), ("GET", "/v1/models", None)],
    ids=["chat", "relayed"],
)
async def test_an_answer_the_server_cannot_write_is_a_502_naming_the_upstream(
    lines: tuple[bytes, ...], status: bytes, method: str, path: str, body: Any
) -> None:
    async with through_proxy(*lines, status=status) as (client, heads):
        response = await client.request(method, path, json=body)
        after = await client.get("/healthz")  # the proxy serves on
    assert response.status_code == 502
    assert response.json()["error"]["code"] in ("upstream_protocol_error", "upstream_connection_lost")
    assert len(heads) == 1  # the upstream's fault: not retried
    assert after.status_code == 200


async def test_a_utf8_value_outside_latin_1_is_relayed_as_its_bytes() -> None:
    value = "café ✓ 東京".encode()
    async with through_proxy(b"x-note: " + value) as (client, _):
        response = await client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 200
    assert response.headers.raw[[name.lower() for name, _ in response.headers.raw].index(b"x-note")][1] == value


async def test_hop_by_hop_headers_and_those_connection_names_stay_behind() -> None:
    hops = [b"connection: x-hop-secret", b"x-hop-secret: 1", b"proxy-connection: keep-alive", b"set-cookie2: a=b",
            b"keep-alive: timeout=5", b"x-kept: yes"]  # fmt: skip
    for path in ("/v1/chat/completions", "/v1/models"):
        async with through_proxy(*hops) as (client, _):
            response = await (client.post(path, json=chat()) if "chat" in path else client.get(path))
        assert response.status_code == 200
        names = {name.lower() for name in response.headers}
        assert names.isdisjoint({"x-hop-secret", "proxy-connection", "set-cookie2", "keep-alive"}), path
        assert response.headers["x-kept"] == "yes"


async def test_the_operators_key_echoed_in_a_header_name_never_reaches_the_client() -> None:
    async with through_proxy(f"x-echo-{KEY}: 1".encode(), f"x-value: Bearer {KEY}".encode()) as (client, _):
        for response in (await client.post("/v1/chat/completions", json=chat()), await client.get("/v1/models")):
            assert response.status_code == 200
            assert KEY.lower() not in repr(response.headers.raw).lower()
            assert response.headers["x-value"] == "Bearer [redacted]"


async def test_a_clients_repeated_header_lines_reach_the_upstream_as_sent() -> None:
    lines = [("X-Foo", "a"), ("anthropic-beta", "tools-2024"), ("X-Foo", "b"), ("anthropic-beta", "cache-2024")]
    async with through_proxy() as (client, heads):
        for path in ("/v1/chat/completions", "/v1/models"):
            request = client.build_request(
                "POST" if "chat" in path else "GET", path, json=chat() if "chat" in path else None
            )
            request.headers = httpx.Headers([*request.headers.multi_items(), *lines])
            assert (await client.send(request)).status_code == 200
    for head in heads:
        sent = [
            line.lower() for line in head.split(b"\r\n") if line.lower().startswith((b"x-foo:", b"anthropic-beta:"))
        ]
        assert sent == [b"x-foo: a", b"anthropic-beta: tools-2024", b"x-foo: b", b"anthropic-beta: cache-2024"]


async def test_a_405_says_which_methods_the_path_serves() -> None:
    async with through_proxy() as (client, heads):
        response = await client.get("/v1/chat/completions")
    assert response.status_code == 405
    assert response.json()["error"]["type"]
    assert "POST" in response.headers["allow"]
    assert heads == []


async def test_a_client_that_cuts_a_relayed_stream_is_logged_as_499_once() -> None:
    async def endless(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        with contextlib.suppress(ConnectionError):
            for _ in range(400):
                event = b'data: {"choices": [{"text": "x"}]}\n\n'
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
                await asyncio.sleep(0.01)

    with structlog.testing.capture_logs() as logs:
        async with raw_upstream(endless) as (url, _):
            with proxy_before(url) as base:
                async with httpx.AsyncClient(base_url=base, timeout=10) as client:
                    body = {"model": "m", "prompt": "p", "stream": True}
                    async with client.stream("POST", "/v1/completions", json=body) as response:
                        assert response.status_code == 200
                        async for _ in response.aiter_bytes():
                            break  # the client hangs up after its first piece
                for _ in range(100):  # the proxy notices at its next write
                    if any(entry["event"] == "request" for entry in logs):
                        break
                    await asyncio.sleep(0.05)
    (line,) = [entry for entry in logs if entry["event"] == "request"]
    assert line["route"] == "/v1/{path:path}"
    assert line["status"] == 499


async def test_an_answer_the_client_never_reads_is_logged_as_499() -> None:
    big = b"[" + b'"' + b"x" * 7_500_000 + b'"]'
    with structlog.testing.capture_logs() as logs:
        async with raw_upstream(answer_with(body=big)) as (url, _):
            with proxy_before(url, client_write_timeout=0.5, keepalive_timeout=0.5) as base:
                port = int(base.rsplit(":", 1)[1])
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.setblocking(False)
                await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
                await asyncio.get_running_loop().sock_sendall(sock, b"GET /v1/models HTTP/1.1\r\nHost: p\r\n\r\n")
                try:
                    for _ in range(100):  # never read: the proxy's buffers fill, and it lets go
                        if any(entry["event"] == "request" for entry in logs):
                            break
                        await asyncio.sleep(0.05)
                finally:
                    sock.close()
    (line,) = [entry for entry in logs if entry["event"] == "request"]
    assert line["status"] == 499

"""The default upstream transport (aiohttp's pool under httpx's API) against a real socket that answers with
scripted bytes: it sends exactly the headers the proxy built, follows no redirect, keeps no cookie, leaves
decoding (bounded) to the proxy, and reports each way a connection can fail as httpx's own pool would; both ways
the proxy makes a call (an `httpx.Response` read whole, and `UpstreamClient.fetch` without one) alike."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable

import pytest

from contextlift.proxy.errors import (
    UpstreamBodyTooLarge,
    UpstreamConnectionLost,
    UpstreamProtocolError,
    UpstreamRedirected,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from contextlift.proxy.local_model import free_port
from contextlift.proxy.upstream.client import StreamLimits, UpstreamClient
from contextlift.proxy.upstream.request import RequestUpstream
from contextlift.proxy.upstream.transport import build_transport
from contextlift.proxy.upstream.transport_errors import mapped_transport_errors
from tests.serving import raw_upstream as scripted

OK = b'{"ok": true}'


def reply(status: str, body: bytes, *headers: str) -> bytes:
    head = [f"HTTP/1.1 {status}", f"content-length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def client(
    url: str, *, timeout: float = 5.0, max_body_bytes: int = 1024 * 1024, deadline: float = 900.0
) -> UpstreamClient:
    limits = StreamLimits(stall_seconds=timeout, max_body_bytes=max_body_bytes, deadline_seconds=deadline)
    return UpstreamClient(
        url,
        api_key="sk-operator",
        timeout=timeout,
        connect_timeout=1.0,
        max_connections=4,
        stream_limits=limits,
        transport=build_transport(4),
    )


Call = Callable[..., Awaitable[tuple[int, bytes]]]


async def send_and_read(upstream: UpstreamClient, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = upstream.build_request(
        "POST", "chat/completions", headers=upstream.forwarded(headers or {}), content=b'{"model": "m"}'
    )
    async with asyncio.timeout(10):  # a regression here hangs; it must fail instead
        response = await upstream.send(request)
        try:
            return response.status_code, await upstream.read(response, None, upstream.deadline())
        finally:
            await response.aclose()


async def fetch(upstream: UpstreamClient, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    async with asyncio.timeout(10):
        answer = await upstream.fetch(
            "POST", "chat/completions", headers=upstream.forwarded(headers or {}), content=b'{"model": "m"}',
            lease=None, deadline=upstream.deadline(),
        )  # fmt: skip
    return answer.status_code, answer.body


@pytest.fixture(params=[send_and_read, fetch], ids=["send-and-read", "fetch"])
def call(request: pytest.FixtureRequest) -> Call:
    """A chat call both ways the proxy makes one: an `httpx.Response` read whole, and `fetch` (without it)."""
    return request.param  # type: ignore[no-any-return]


async def test_both_ways_send_the_same_bytes() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", OK))

    async with scripted(answer) as (url, heads):
        upstream = client(url)
        headers = {"User-Agent": "OpenAI/Python 1.0", "content-type": "application/json", "X-Title": "caf\xc3\xa9"}
        assert await send_and_read(upstream, headers) == await fetch(upstream, headers) == (200, OK)
        await upstream.aclose()
    assert heads[0] == heads[1]


async def test_sends_the_headers_the_proxy_built_and_nothing_of_its_own(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", OK))

    async with scripted(answer) as (url, heads):
        upstream = client(url)
        await call(upstream, {"user-agent": "OpenAI/Python 1.0", "content-type": "application/json"})
        await upstream.aclose()
    lines = heads[0].decode().lower().split("\r\n")
    assert lines[0] == "post /v1/chat/completions http/1.1"
    assert "user-agent: openai/python 1.0" in lines
    assert "authorization: bearer sk-operator" in lines
    assert not [line for line in lines if "aiohttp" in line or "python/3" in line]
    assert sum(line.startswith("content-type:") for line in lines) == 1


async def test_a_redirect_is_neither_followed_nor_answered(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("302 Found", b"", "location: http://169.254.169.254/latest/meta-data"))

    async with scripted(answer) as (url, heads):
        upstream = client(url)
        with pytest.raises(UpstreamRedirected):
            await call(upstream)
        await upstream.aclose()
    assert len(heads) == 1


async def test_a_cookie_set_for_one_client_never_rides_with_the_next(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", OK, "set-cookie: session=alice; Path=/"))

    async with scripted(answer) as (url, heads):
        upstream = client(url)
        await call(upstream)
        await call(upstream)
        await upstream.aclose()
    assert len(heads) == 2
    assert b"cookie" not in heads[1].lower()


async def test_a_gzip_body_is_decoded_by_the_proxy_within_its_bound(call: Call) -> None:
    small, bomb = gzip.compress(OK), gzip.compress(b" " * (8 * 1024 * 1024))

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", small if n == 0 else bomb, "content-encoding: gzip"))

    async with scripted(answer) as (url, _):
        upstream = client(url, max_body_bytes=64 * 1024)
        assert await call(upstream) == (200, OK)
        with pytest.raises(UpstreamBodyTooLarge):
            await call(upstream)
        await upstream.aclose()


async def test_a_connection_cut_in_the_middle_of_the_body_is_a_lost_connection(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n" + b"{" * 10)
        await writer.drain()
        writer.close()

    async with scripted(answer) as (url, _):
        upstream = client(url)
        with pytest.raises(UpstreamConnectionLost):
            await call(upstream)
        await upstream.aclose()


async def test_a_server_that_hangs_up_before_answering_is_a_lost_connection_not_unreachable(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.close()

    async with scripted(answer) as (url, _):
        upstream = client(url)
        with pytest.raises(UpstreamConnectionLost), mapped_transport_errors("before answering"):
            await call(upstream)
        await upstream.aclose()


async def test_a_refused_connection_is_unreachable(call: Call) -> None:
    upstream = client(f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(UpstreamUnreachable), mapped_transport_errors("before answering"):
        await call(upstream)
    await upstream.aclose()


async def test_an_upstream_that_never_answers_times_out(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        await asyncio.sleep(30)

    async with scripted(answer) as (url, _):
        upstream = client(url, timeout=0.3)
        with pytest.raises(UpstreamTimeout), mapped_transport_errors("before answering"):
            await call(upstream)
        await upstream.aclose()


async def test_a_base_url_with_user_info_goes_as_basic_auth(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", OK))

    async with scripted(answer) as (url, heads):
        upstream = client(url.replace("http://", "http://user:secret@"))
        assert await call(upstream) == (200, OK)
        await upstream.aclose()
    head = heads[0].decode("latin-1").lower()
    assert "authorization: basic dxnlcjpzzwnyzxq=\r\n" in head  # base64 of user:secret, as httpx's client sent it
    assert "secret" not in head.replace("dxnlcjpzzwnyzxq=", "")


async def test_a_body_that_stops_halfway_times_out(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"{" * 10)
        await writer.drain()
        await asyncio.sleep(30)

    async with scripted(answer) as (url, _):
        upstream = client(url, timeout=0.3)
        with pytest.raises(UpstreamTimeout):
            await call(upstream)
        await upstream.aclose()


async def test_a_body_that_trickles_past_the_deadline_times_out(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
        for _ in range(100):
            writer.write(b" ")  # each byte well within the stall bound, the whole far past the deadline
            await writer.drain()
            await asyncio.sleep(0.05)

    async with scripted(answer) as (url, _):
        upstream = client(url, timeout=2.0, deadline=0.5)
        with pytest.raises(UpstreamTimeout, match="deadline"):
            await call(upstream)
        await upstream.aclose()


async def test_an_answer_streams_chunk_by_chunk() -> None:
    events = [json.dumps({"n": i}).encode() for i in range(3)]

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for event in events:
            data = b"data: " + event + b"\n\n"
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
        writer.write(b"0\r\n\r\n")

    async with scripted(answer) as (url, _):
        upstream = client(url)
        request = upstream.build_request("POST", "chat/completions", headers=upstream.forwarded({}), content=b"{}")
        response = await upstream.send(request)
        pieces = [piece async for piece in response.aiter_raw()]
        await response.aclose()
        await upstream.aclose()
    assert len(pieces) >= 3
    assert b"".join(pieces) == b"".join(b"data: " + e + b"\n\n" for e in events)


# --- found by a hostile review of this transport -------------------------------------------------------------------


async def test_bytes_an_idle_connection_received_are_never_the_next_answer(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", json.dumps({"answer": n}).encode()))
        await writer.drain()
        await asyncio.sleep(0.1)
        writer.write(reply("200 OK", b'{"injected": true}'))  # unasked, on the idle keep-alive connection

    async with scripted(answer) as (url, heads):
        upstream = client(url)
        first = await call(upstream)
        await asyncio.sleep(0.3)
        second = await call(upstream)
        await upstream.aclose()
    assert first == (200, b'{"answer": 0}')
    assert second[1] != b'{"injected": true}'
    assert len(heads) == 2


async def test_a_clients_expect_100_continue_stays_on_its_own_hop(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", OK))

    async with scripted(answer) as (url, heads):
        upstream = client(url)
        assert await call(upstream, {"expect": "100-continue"}) == (200, OK)
        await upstream.aclose()
    assert b"expect" not in heads[0].lower()


async def test_an_unasked_protocol_switch_is_a_broken_upstream_not_an_answer(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\nGARBAGE")

    async with scripted(answer) as (url, _):
        upstream = client(url)
        with pytest.raises(UpstreamProtocolError) as raised, mapped_transport_errors("before answering"):
            await call(upstream)
        await upstream.aclose()
    assert not isinstance(raised.value, UpstreamConnectionLost)  # the upstream answered: nothing was lost


async def test_a_dropped_reused_connection_is_not_silently_sent_again() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        if n == 0:
            writer.write(reply("200 OK", OK))
        else:
            writer.transport.abort()  # read the request, then hang up without a word

    async with scripted(answer) as (url, heads):
        upstream = client(url)
        await relayed(upstream, "GET", "models")
        with pytest.raises(UpstreamConnectionLost), mapped_transport_errors("before answering"):
            await relayed(upstream, "DELETE", "files/abc")
        await upstream.aclose()
    assert len(heads) == 2  # the proxy retries by its own rules, counted; the transport never does


async def test_a_long_answer_header_is_read_as_httpxs_pool_read_it(call: Call) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", OK, "x-long: " + "v" * 20_000, *(f"x-{i}: {i}" for i in range(200))))

    async with scripted(answer) as (url, _):
        upstream = client(url)
        assert await call(upstream) == (200, OK)
        await upstream.aclose()


async def test_the_query_and_the_header_names_and_values_go_as_the_client_sent_them() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", OK))

    query = "q=%2F%2F&p=a%40b%3A&r=%24%21%27%28%29%2A%2C"
    # The server decodes a head as latin-1: a client's UTF-8 "café" arrives as this str.
    title = "café".encode().decode("latin-1")
    async with scripted(answer) as (url, heads):
        upstream = client(url)
        headers = upstream.forwarded({"X-Title": title, "OpenAI-Organization": "org"})
        request = upstream.build_request("GET", "files", headers=headers, params=query)
        response = await upstream.send(request)
        await response.aclose()
        await upstream.aclose()
    head = heads[0]
    assert head.startswith(f"GET /v1/files?{query} HTTP/1.1\r\n".encode())
    assert "X-Title: café\r\n".encode() in head
    assert b"OpenAI-Organization: org\r\n" in head


async def relayed(upstream: UpstreamClient, method: str, path: str) -> int:
    request = upstream.build_request(method, path, headers=upstream.forwarded({}))
    async with asyncio.timeout(10):
        response = await upstream.send(request)
        await response.aclose()
    return response.status_code


async def test_a_relayed_call_whose_body_the_upstream_never_reads_times_out() -> None:
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(30)  # neither reads the body nor answers

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    upstream = client(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", timeout=0.5)
    try:
        async with asyncio.timeout(10):
            with pytest.raises(UpstreamTimeout):
                await RequestUpstream(upstream, {}).relay("POST", "files", b"x" * (32 * 1024 * 1024))
    finally:
        await upstream.aclose()
        for writer in writers:
            writer.close()
        server.close()

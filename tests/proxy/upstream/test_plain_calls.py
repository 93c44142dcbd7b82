"""A call read whole from a plain-http upstream (`proxy.upstream.http11`, `UpstreamClient.fetch`'s way on the default
transport) against a real socket that answers with scripted bytes: connections kept alive and reused only when the
answer left them clean, every way HTTP/1.1 frames a body, interim answers skipped, the head bounded, a body larger
than the read buffer, and a call given up on never leaving its connection for the next. On both event loops
(conftest.py)."""

from __future__ import annotations

import asyncio

import pytest

from contextlift.proxy.errors import UpstreamConnectionLost, UpstreamError, UpstreamProtocolError
from contextlift.proxy.upstream.client import Fetched, UpstreamClient
from contextlift.proxy.upstream.transport import MAX_HEAD_LINE_BYTES, MAX_RESPONSE_HEADERS
from contextlift.proxy.upstream.transport_errors import mapped_transport_errors
from tests.proxy.upstream.test_upstream_transport import OK, client, fetch, reply
from tests.serving import raw_upstream as scripted

Answer = list[tuple[int, bytes]]


def numbered(n: int) -> bytes:
    return b'{"answer": %d}' % n


async def fetched(upstream: UpstreamClient) -> Fetched:
    """The whole answer `fetch` gives (its headers too), for a small chat call."""
    return await upstream.fetch(
        "POST", "chat/completions", headers={}, content=b"{}", lease=None, deadline=upstream.deadline()
    )


async def calls(upstream: UpstreamClient, count: int) -> Answer:
    return [await fetch(upstream) for _ in range(count)]


async def test_a_kept_alive_connection_carries_the_next_calls() -> None:
    ports: list[int] = []

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        ports.append(writer.get_extra_info("peername")[1])
        writer.write(reply("200 OK", numbered(n)))

    async with scripted(answer) as (url, _):
        upstream = client(url)
        assert await calls(upstream, 3) == [(200, numbered(n)) for n in range(3)]
        await upstream.aclose()
    assert len(set(ports)) == 1


@pytest.mark.parametrize(
    "ending",
    [
        pytest.param(lambda n: reply("200 OK", numbered(n), "connection: close"), id="connection-close"),
        pytest.param(lambda n: b"HTTP/1.0 200 OK\r\ncontent-length: 13\r\n\r\n" + numbered(n), id="http-1.0"),
    ],
)
async def test_an_answer_that_ends_its_connection_is_followed_by_a_new_one(ending: object) -> None:
    ports: list[int] = []

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        ports.append(writer.get_extra_info("peername")[1])
        writer.write(ending(n))  # type: ignore[operator]
        await writer.drain()
        writer.close()

    async with scripted(answer) as (url, _):
        upstream = client(url)
        assert await calls(upstream, 2) == [(200, numbered(0)), (200, numbered(1))]
        await upstream.aclose()
    assert len(set(ports)) == 2


async def test_a_body_without_a_length_ends_with_the_connection() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + OK[:5])
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(OK[5:])
        await writer.drain()
        writer.close()

    async with scripted(answer) as (url, _):
        upstream = client(url)
        assert await calls(upstream, 2) == [(200, OK), (200, OK)]
        await upstream.aclose()


async def test_a_chunked_body_is_joined_and_its_trailer_never_joins_the_head() -> None:
    ports: list[int] = []

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        ports.append(writer.get_extra_info("peername")[1])
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n" + OK[:5] + b"\r\n")
        await writer.drain()
        writer.write(b"%x\r\n" % len(OK[5:]) + OK[5:] + b"\r\n0\r\nx-trailer: late\r\n\r\n")

    async with scripted(answer) as (url, _):
        upstream = client(url)
        for _ in range(2):
            answer_read = await fetched(upstream)
            assert (answer_read.status_code, answer_read.body) == (200, OK)
            assert "x-trailer" not in answer_read.headers
        await upstream.aclose()
    assert len(set(ports)) == 1


async def test_interim_answers_are_skipped_and_the_final_one_read() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\n\r\n")
        await writer.drain()
        writer.write(reply("200 OK", OK, "x-final: yes"))

    async with scripted(answer) as (url, _):
        upstream = client(url)
        answer_read = await fetched(upstream)
        assert (answer_read.status_code, answer_read.body) == (200, OK)
        assert answer_read.headers["x-final"] == "yes"
        assert "link" not in answer_read.headers
        await upstream.aclose()


async def test_a_second_answer_written_after_the_asked_one_is_never_read() -> None:
    ports: list[int] = []

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        ports.append(writer.get_extra_info("peername")[1])
        writer.write(reply("200 OK", numbered(n)) + reply("200 OK", b'{"injected": true}'))

    async with scripted(answer) as (url, _):
        upstream = client(url)
        assert await calls(upstream, 2) == [(200, numbered(0)), (200, numbered(1))]
        await upstream.aclose()
    assert len(set(ports)) == 2  # the connection that carried the stray answer was not used again


@pytest.mark.parametrize(
    "head",
    [
        pytest.param([f"x-{i}: {i}" for i in range(MAX_RESPONSE_HEADERS + 1)], id="too-many-headers"),
        pytest.param(["x-long: " + "v" * MAX_HEAD_LINE_BYTES], id="a-line-too-long"),
    ],
)
async def test_a_head_past_its_bounds_is_a_malformed_answer(head: list[str]) -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", OK, *head))

    async with scripted(answer) as (url, _):
        upstream = client(url)
        with pytest.raises(UpstreamProtocolError) as raised, mapped_transport_errors("before answering"):
            await fetch(upstream)
        await upstream.aclose()
    assert not isinstance(raised.value, UpstreamConnectionLost)


async def test_a_body_larger_than_the_read_buffer_arrives_whole() -> None:
    body = bytes(range(256)) * (3 * 4096)  # 3 MiB, past the 256 KiB at which reading pauses

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", body))

    async with scripted(answer) as (url, _):
        upstream = client(url, max_body_bytes=4 * 1024 * 1024)
        assert await calls(upstream, 2) == [(200, body), (200, body)]
        await upstream.aclose()


async def test_a_call_given_up_on_mid_body_never_leaves_its_connection_for_the_next() -> None:
    ports: list[int] = []

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        ports.append(writer.get_extra_info("peername")[1])
        if n == 0:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n" + b"x" * 10)
            await writer.drain()
            await asyncio.sleep(0.3)
            writer.write(b"x" * 90)  # the rest, after the call was given up on: never the next call's answer
        else:
            writer.write(reply("200 OK", numbered(n)))

    async with scripted(answer) as (url, _):
        upstream = client(url)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.1):
                await fetch(upstream)
        await asyncio.sleep(0.4)
        assert await fetch(upstream) == (200, numbered(1))
        await upstream.aclose()
    assert len(set(ports)) == 2


async def test_a_reset_in_the_middle_of_the_body_is_a_lost_connection() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n" + b"{" * 10)
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()

    async with scripted(answer) as (url, _):
        upstream = client(url)
        with pytest.raises(UpstreamConnectionLost):
            await fetch(upstream)
        await upstream.aclose()


async def test_a_kept_alive_connection_the_upstream_closed_while_idle_is_not_used() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(reply("200 OK", numbered(n)))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()  # an idle timeout on the upstream's side, between two calls

    async with scripted(answer) as (url, heads):
        upstream = client(url)
        first = await fetch(upstream)
        await asyncio.sleep(0.3)
        assert [first, await fetch(upstream)] == [(200, numbered(0)), (200, numbered(1))]
        await upstream.aclose()
    assert len(heads) == 2


# --- found by a hostile review of this client ------------------------------------------------------------------------


async def test_a_trailer_growing_without_end_is_refused_before_it_is_held() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\nx-t: ")
        for _ in range(64):  # 16 MiB of one trailer line, as fast as the socket takes it
            writer.write(b"a" * (256 * 1024))
            await writer.drain()
        writer.write(b"\r\n\r\n")

    async with scripted(answer) as (url, _):
        upstream = client(url)
        with pytest.raises(UpstreamError):
            await fetch(upstream)
        await upstream.aclose()


async def test_one_header_line_growing_without_end_is_refused_at_the_heads_bound() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nx-big: ")
        for _ in range(16):  # 4 MiB of one line; refused at MAX_HEAD_BYTES, long before its end
            writer.write(b"a" * (256 * 1024))
            await writer.drain()

    async with scripted(answer) as (url, _):
        upstream = client(url)
        with pytest.raises(UpstreamProtocolError), mapped_transport_errors("before answering"):
            await fetch(upstream)
        await upstream.aclose()


async def test_a_body_whose_last_coding_is_not_chunked_ends_with_the_connection() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\n" + OK)
        await writer.drain()
        writer.close()

    async with scripted(answer) as (url, _):
        upstream = client(url)
        assert await fetch(upstream) == (200, OK)
        await upstream.aclose()


async def test_the_read_timeout_is_silence_so_interim_answers_keep_a_slow_upstream_alive() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        for _ in range(6):  # 0.6 s of "102 Processing", each well within the 0.3 s read timeout
            writer.write(b"HTTP/1.1 102 Processing\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.1)
        writer.write(reply("200 OK", OK))

    async with scripted(answer) as (url, _):
        upstream = client(url, timeout=0.3)
        assert await fetch(upstream) == (200, OK)
        await upstream.aclose()


async def test_a_quirky_head_is_read_as_aiohttp_reads_it() -> None:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\ncontent-length: 12\nx-padded:   value  \t\n\n" + OK)

    async with scripted(answer) as (url, _):
        upstream = client(url)
        answer_read = await fetched(upstream)
        assert (answer_read.status_code, answer_read.body) == (200, OK)
        assert answer_read.headers["x-padded"] == "value"
        await upstream.aclose()

"""`X-Context-Overhead-Ms` counts the HTTP client's building and writing of a call as the proxy's own time: the wait on
the upstream starts when the transport says the request went out (`SENT_EXTENSION`), else when it was handed over."""

from __future__ import annotations

import asyncio
import time

import httpx

from contextlift.proxy.upstream.transport import SENT_EXTENSION, WAIT_EXTENSION, TimedTransport, build_transport
from tests.serving import raw_upstream

WRITING = 0.05


class _SlowWriter(httpx.AsyncBaseTransport):
    """Spends WRITING seconds of its own before the request goes out, and says when it went, as aiohttp's does."""

    def __init__(self, says_when: bool) -> None:
        self.says_when = says_when

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(WRITING)
        if self.says_when:
            request.extensions[SENT_EXTENSION] = time.perf_counter()
        return httpx.Response(200, content=b"{}")


async def waits_of(says_when: bool) -> list[tuple[float, float]]:
    waits: list[tuple[float, float]] = []
    request = httpx.Request("POST", "http://upstream.test/v1/chat/completions", content=b"{}")
    request.extensions[WAIT_EXTENSION] = lambda start, end: waits.append((start, end))
    response = await TimedTransport(_SlowWriter(says_when)).handle_async_request(request)
    await response.aclose()
    return waits


async def test_the_clients_writing_is_the_proxys_time() -> None:
    (start, end), *_ = await waits_of(says_when=True)
    assert end - start < WRITING / 2


async def test_without_a_time_from_the_transport_the_wait_starts_when_it_was_handed_over() -> None:
    (start, end), *_ = await waits_of(says_when=False)
    assert end - start >= WRITING


async def test_aiohttps_transport_says_when_the_request_went_out() -> None:
    async def answer(writer: asyncio.StreamWriter, _: int) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")

    async with raw_upstream(answer) as (url, _):
        transport = build_transport(4)
        assert transport is not None
        request = httpx.Request("POST", f"{url}/chat/completions", content=b'{"model": "m"}')
        handed_over = time.perf_counter()
        response = await transport.handle_async_request(request)
        await response.aread()
        await transport.aclose()
    assert handed_over < request.extensions[SENT_EXTENSION] < time.perf_counter()

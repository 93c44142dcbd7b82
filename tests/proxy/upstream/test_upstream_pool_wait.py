"""More concurrent calls than pooled connections wait for one inside the proxy: that wait has its own short bound
(`upstream_pool_wait`), is never counted in the upstream timeout, and if it runs out the client gets the proxy's
own 503, never an upstream timeout the upstream did not cause."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy.upstream import transport
from tests.fakes import FakeEmbedder, completion
from tests.serving import UPSTREAM, chat, raw_upstream

UPSTREAM_SECONDS = 0.5


def slow_upstream() -> tuple[httpx.MockTransport, list[int]]:
    in_flight = [0, 0]  # now, most at once

    async def handler(request: httpx.Request) -> httpx.Response:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await asyncio.sleep(UPSTREAM_SECONDS)
        in_flight[0] -= 1
        return httpx.Response(200, json=completion())

    return httpx.MockTransport(handler), in_flight


async def run(count: int, **settings: Any) -> tuple[list[httpx.Response], int]:
    transport, in_flight = slow_upstream()
    app = create_app(Settings(upstream_url=UPSTREAM, **settings), transport=transport, embedder=FakeEmbedder())
    # httpx's ASGI transport runs requests concurrently, as a server would (the test clients take turns).
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
        calls = [client.post("/v1/chat/completions", json=chat()) for _ in range(count)]
        responses = await asyncio.gather(*calls)
    return list(responses), in_flight[1]


async def test_queued_calls_do_not_spend_the_upstream_timeout_waiting() -> None:
    responses, most = await run(6, upstream_max_connections=4, upstream_timeout=0.8)
    assert [r.status_code for r in responses] == [200] * 6
    assert most == 4


async def test_a_wait_that_runs_out_is_the_proxys_503_not_a_504() -> None:
    responses, _ = await run(
        12, upstream_max_connections=2, upstream_timeout=0.8, upstream_pool_wait=0.8, max_retries=0
    )
    statuses = sorted(r.status_code for r in responses)
    assert 504 not in statuses
    assert 503 in statuses
    refused = next(r for r in responses if r.status_code == 503)
    assert refused.json()["error"]["code"] == "upstream_pool_exhausted"


async def test_the_pool_wait_has_its_own_bound_far_below_the_upstream_timeout() -> None:
    # Two connections, each held 0.5 s; a 30 s upstream timeout would once have let the 8th call wait 2 s.
    started = time.monotonic()
    responses, _ = await run(8, upstream_max_connections=2, upstream_timeout=30, upstream_pool_wait=0.2, max_retries=0)
    seconds = time.monotonic() - started
    refused = [r for r in responses if r.status_code == 503]
    assert [r.status_code for r in responses].count(200) == 2
    assert len(refused) == 6
    assert all(r.json()["error"]["code"] == "upstream_pool_exhausted" for r in refused)
    assert all(r.headers["retry-after"] == "1" for r in refused)
    assert seconds < 1.5  # the two served calls (0.5 s), not the 2 s the queue would take to drain


def test_the_pool_wait_is_a_setting_with_a_short_default() -> None:
    assert Settings(upstream_url=UPSTREAM).upstream_pool_wait == 10.0
    assert Settings.model_fields["upstream_pool_wait"].description


async def test_the_pool_wait_does_not_bound_setting_up_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    # A connection whose set-up takes 1 s (a slow resolver here, the part of set-up a test can slow on loopback),
    # with the pool wait at 0.5 s and the connect timeout at 5 s: the pool is free, so nothing waits for a slot.
    async def slow_resolve(self: Any, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(1.0)
        return await resolve(self, *args, **kwargs)

    resolve = transport._FreshConnector._resolve_host
    monkeypatch.setattr(transport._FreshConnector, "_resolve_host", slow_resolve)
    body = json.dumps(completion()).encode()

    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )

    async with raw_upstream(answer) as (url, _):
        settings = Settings(upstream_url=url, upstream_pool_wait=0.5, upstream_connect_timeout=5, max_retries=0)
        app = create_app(settings, embedder=FakeEmbedder())
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
            response = await client.post("/v1/chat/completions", json=chat())
        await app.state["proxy"].upstream.aclose()
    assert response.status_code == 200, response.text

"""Upstream failures: refused 502, timed out 504, error responses relayed as they came."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from tests.fakes import FakeUpstream
from tests.serving import chat


def test_connection_refused_is_502_after_bounded_retries(client: Any, fake: FakeUpstream) -> None:
    fake.queue(*[httpx.ConnectError("refused by fake")] * 3)
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 502
    assert len(fake.requests) == 3
    assert response.headers["x-context-upstream-calls"] == "3"
    assert response.json()["error"]["code"] == "upstream_unreachable"
    assert response.json()["error"]["type"] == "upstream_error"


def test_upstream_silent_past_deadline_is_504(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(upstream_timeout=0.2)

    closed: list[bool] = []

    async def never(request: httpx.Request) -> httpx.Response:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            closed.append(True)  # the proxy abandoned the call: its connection is released
            raise
        raise AssertionError("the proxy should have given up")

    fake.queue(never)
    started = time.monotonic()
    response = client.post("/v1/chat/completions", json=chat())
    assert time.monotonic() - started < 2
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    # The client is told which bound it met, and the setting that moves it.
    assert "0.2 s (CONTEXTLIFT_UPSTREAM_TIMEOUT)" in response.json()["error"]["message"]
    assert closed == [True]
    assert len(fake.requests) == 1  # a timeout is not retried: the deadline is spent


def test_httpx_read_timeout_is_504(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.ReadTimeout("slow fake"))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 504


def test_upstream_error_status_body_and_retry_headers_pass_through(client: Any, fake: FakeUpstream) -> None:
    error = {"error": {"message": "Rate limit reached", "type": "requests", "param": None, "code": "rate_limit"}}
    fake.queue(
        httpx.Response(
            429,
            json=error,
            headers={"retry-after": "60", "x-ratelimit-remaining-requests": "0", "x-request-id": "up-1"},
        )
    )
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 429
    assert response.json() == error
    assert response.headers["retry-after"] == "60"
    assert response.headers["x-ratelimit-remaining-requests"] == "0"
    assert response.headers["x-request-id"] == "up-1"
    assert len(response.headers["x-contextlift-request-id"]) == 32
    assert response.headers["x-context-upstream-calls"] == "1"


def test_upstream_error_on_stream_request_passes_through(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(401, json={"error": {"message": "bad key", "code": "invalid_api_key"}}))
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_upstream_non_json_completion_is_502(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, content=b"<html>gateway</html>"))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 502
    assert len(fake.requests) == 1
    assert response.json()["error"]["code"] == "upstream_protocol_error"


def test_redirects_are_neither_followed_nor_relayed(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(307, headers={"location": "http://elsewhere.test/v1/chat/completions"}))
    response = client.post("/v1/chat/completions", json=chat(), follow_redirects=False)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_redirect"
    assert "location" not in response.headers
    assert len(fake.requests) == 1

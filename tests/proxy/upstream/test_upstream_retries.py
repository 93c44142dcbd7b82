"""Retries: transient upstream failures are retried with jittered backoff, bounded by settings; client errors
and long Retry-After waits go to the client after one attempt."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from contextlift.proxy.errors import UpstreamStatusError, UpstreamTimeout, UpstreamUnreachable
from contextlift.proxy.upstream.retry import RetryPolicy, retry_after_seconds
from tests.fakes import FakeUpstream, completion
from tests.serving import chat


def test_503_503_then_200_reaches_the_client_as_200(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(503), httpx.Response(503), httpx.Response(200, json=completion("ok")))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "ok"
    assert len(fake.requests) == 3
    assert response.headers["x-context-upstream-calls"] == "3"


def test_attempts_are_bounded_by_settings(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_retries=1)
    fake.queue(*[httpx.Response(503, json={"error": {"message": "busy"}})] * 5)
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 503
    assert response.json() == {"error": {"message": "busy"}}
    assert len(fake.requests) == 2


def test_short_retry_after_is_honoured(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(429, headers={"retry-after-ms": "20"}), httpx.Response(200, json=completion()))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 200
    assert len(fake.requests) == 2


def test_long_retry_after_is_returned_at_once(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(429, headers={"retry-after": "120"}, json={"error": {"message": "later"}}))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 429
    assert response.headers["retry-after"] == "120"
    assert len(fake.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_pass_through_after_exactly_one_attempt(client: Any, fake: FakeUpstream, status: int) -> None:
    fake.queue(httpx.Response(status, json={"error": {"message": "no"}}))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == status
    assert len(fake.requests) == 1


def test_streams_are_retried_before_their_first_byte(client: Any, fake: FakeUpstream) -> None:
    from tests.fakes import chunk, sse_body, sse_response

    fake.queue(httpx.Response(502), sse_response(sse_body([chunk("hi"), chunk(finish="stop")])))
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert response.status_code == 200
    assert response.text.endswith("data: [DONE]\n\n")
    assert len(fake.requests) == 2


def test_backoff_is_jittered_exponential_and_capped() -> None:
    policy = RetryPolicy(max_retries=5, backoff=1.0, max_backoff=4.0)
    error = UpstreamUnreachable("down")
    delays = [[policy.delay(n, error) for n in range(1, 6)] for _ in range(50)]
    for series in delays:
        for n, delay in enumerate(series, start=1):
            assert delay is not None
            ceiling = min(4.0, 2.0 ** (n - 1))
            assert ceiling / 2 <= delay <= ceiling
    assert len({round(s[0] or 0, 6) for s in delays}) > 1
    assert policy.delay(6, error) is None


def test_timeouts_are_not_retried() -> None:
    assert RetryPolicy().delay(1, UpstreamTimeout("slow")) is None
    assert RetryPolicy().delay(1, UpstreamStatusError(404, b"", {})) is None


def test_retry_after_forms() -> None:
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"Retry-After-Ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None

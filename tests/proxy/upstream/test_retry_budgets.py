"""Retries stay bounded whatever the upstream says: an invalid or negative Retry-After keeps the backoff,
a fan-out shares one retry budget per request, and a request the client's SDK is already retrying is not
retried again by the proxy."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from contextlift.proxy.upstream.retry import retry_after_seconds
from tests.fakes import FakeUpstream, completion
from tests.serving import chat

DOCS = "\n".join(f"Document [{i}](Title: Place {i}) Place {i} exports item {i}." for i in range(1, 6))


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": "nan"},
        {"retry-after": "-inf"},
        {"retry-after": "inf"},
        {"retry-after": "-5"},
        {"retry-after-ms": "-5000"},
        {"retry-after-ms": "nan"},
        {"retry-after-ms": "Infinity"},
    ],
)
def test_an_invalid_or_negative_retry_after_is_ignored(headers: dict[str, str]) -> None:
    assert retry_after_seconds(headers) is None


def test_a_valid_retry_after_is_still_honoured() -> None:
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"retry-after": "2"}) == 2.0


def test_nan_retry_after_keeps_the_backoff_between_attempts(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(retry_backoff=0.2, max_retries=2)
    times: list[float] = []

    def busy(request: httpx.Request) -> httpx.Response:
        times.append(time.monotonic())
        return httpx.Response(503, headers={"retry-after": "nan"})

    fake.queue(busy, busy, busy)
    client.post("/v1/chat/completions", json=chat())
    assert len(times) == 3
    assert times[1] - times[0] >= 0.09  # the backoff's jitter takes at most half of 0.2 s off


def test_a_fan_out_shares_one_retry_budget(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(retry_budget=2, max_retries=2, max_upstream_calls=30)
    fake.queue(*[httpx.Response(503)] * 40)
    response = client.post(
        "/v1/chat/completions", json=chat(f"{DOCS}\n\nQuestion: what does place 3 export?"),
        headers={"x-context-strategy": "medoid; k=5"},
    )  # fmt: skip
    assert response.status_code == 503
    assert len(fake.requests) <= 5 + 2


def test_a_request_the_sdk_is_retrying_is_not_retried_again(client: Any, fake: FakeUpstream) -> None:
    fake.queue(*[httpx.Response(500)] * 5)
    response = client.post("/v1/chat/completions", json=chat(), headers={"x-stainless-retry-count": "1"})
    assert response.status_code == 500
    assert len(fake.requests) == 1


def test_a_first_attempt_from_the_sdk_is_retried_as_usual(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(500), httpx.Response(200, json=completion()))
    response = client.post("/v1/chat/completions", json=chat(), headers={"x-stainless-retry-count": "0"})
    assert response.status_code == 200
    assert len(fake.requests) == 2

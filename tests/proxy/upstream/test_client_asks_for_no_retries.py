"""A client bounds the proxy's retries of its request with `X-Context-Retries` (0: none), as an SDK's
`max_retries=0` would expect; the operator's settings still bound it, a malformed value is a 400 before any call,
and the header never goes upstream."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream
from tests.serving import chat

BUSY = {"error": {"message": "busy", "type": "server_error"}}


def always_busy(fake: FakeUpstream, count: int = 5) -> None:
    fake.queue(*(httpx.Response(503, json=BUSY) for _ in range(count)))


@pytest.mark.parametrize(("asked", "calls"), [("0", 1), ("1", 2), (" 2 ", 3), ("9", 3)])
@pytest.mark.parametrize("stream", [False, True])
def test_the_client_bounds_the_retries_below_the_operators(
    make_client: Any, fake: FakeUpstream, asked: str, calls: int, stream: bool
) -> None:
    client = make_client(max_retries=2, retry_budget=4)
    always_busy(fake)
    response = client.post("/v1/chat/completions", json=chat(stream=stream), headers={"X-Context-Retries": asked})
    assert response.status_code == 503
    assert len(fake.requests) == calls
    assert all("x-context-retries" not in request.headers for request in fake.requests)


def test_without_the_header_the_operators_retries_apply(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_retries=2)
    always_busy(fake)
    client.post("/v1/chat/completions", json=chat())
    assert len(fake.requests) == 3


@pytest.mark.parametrize("value", ["-1", "none", "1.5", "0x1", "1000", ""])
def test_a_malformed_value_is_refused_before_any_call(make_client: Any, fake: FakeUpstream, value: str) -> None:
    client = make_client()
    response = client.post("/v1/chat/completions", json=chat(), headers={"X-Context-Retries": value})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "X-Context-Retries"
    assert fake.requests == []


@pytest.mark.parametrize(
    "headers",
    [
        [("X-Context-Retries", "2"), ("X-Context-Retries", "0")],
        [("X-Context-Retries", "0"), ("X-Context-Retries", "2")],
        [("X-Context-Retries", "2, 0")],
    ],
)
def test_a_repeated_header_counts_its_smallest_value(
    make_client: Any, fake: FakeUpstream, headers: list[tuple[str, str]]
) -> None:
    client = make_client(max_retries=2, retry_budget=4)
    always_busy(fake)
    response = client.post("/v1/chat/completions", json=chat(), headers=headers)
    assert response.status_code == 503
    assert len(fake.requests) == 1


def test_a_repeated_header_with_one_malformed_value_is_refused(make_client: Any, fake: FakeUpstream) -> None:
    headers = [("X-Context-Retries", "0"), ("X-Context-Retries", "many")]
    response = make_client().post("/v1/chat/completions", json=chat(), headers=headers)
    assert response.status_code == 400
    assert fake.requests == []

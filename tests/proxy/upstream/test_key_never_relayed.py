"""The key the proxy sends upstream never comes back to a client: on every route, streamed or not, in
bodies (plain or gzip-encoded, split across chunks) and in headers, error and success answers alike."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream, chunk, sse_body, sse_response
from tests.serving import chat

KEY = "sk-operator-0123456789abcdef"


def echo(status: int, *, encoding: str | None = None) -> Any:
    """A fake upstream that repeats the credentials it was sent, as many real ones do on a 401."""

    def answer(request: httpx.Request) -> httpx.Response:
        token = request.headers["authorization"].removeprefix("Bearer ")
        body = json.dumps({"error": {"message": f"invalid key {token}"}, "data": [token]}).encode()
        headers = {"www-authenticate": f'Bearer realm="x", key="{token}"', "content-type": "application/json"}
        if encoding == "gzip":
            headers["content-encoding"] = "gzip"
            return httpx.Response(status, content=network(gzip.compress(body)), headers=headers)
        return httpx.Response(status, content=body, headers=headers)

    return answer


async def network(body: bytes) -> AsyncIterator[bytes]:
    yield body


def split_echo(request: httpx.Request) -> httpx.Response:
    """The key cut in two across network chunks."""
    token = request.headers["authorization"].removeprefix("Bearer ").encode()

    async def pieces() -> AsyncIterator[bytes]:
        yield b'{"echo": "' + token[:10]
        yield token[10:] + b'"}'

    return httpx.Response(200, content=pieces(), headers={"content-type": "application/json"})


def assert_no_key(response: httpx.Response) -> None:
    assert KEY not in response.text
    assert all(KEY not in value for value in response.headers.values())


@pytest.mark.parametrize("status", [200, 401, 500])
@pytest.mark.parametrize("encoding", [None, "gzip"])
@pytest.mark.parametrize(
    ("method", "path"), [("POST", "/v1/embeddings"), ("GET", "/v1/files"), ("POST", "/v1/completions")]
)
def test_pass_through_routes_blank_the_key(
    make_client: Any, fake: FakeUpstream, status: int, encoding: str | None, method: str, path: str
) -> None:
    client = make_client(upstream_api_key=KEY, max_retries=0)
    fake.queue(echo(status, encoding=encoding))
    response = client.request(method, path, json={"model": "m", "input": "x"} if method == "POST" else None)
    assert response.status_code == status
    assert_no_key(response)
    assert "[redacted]" in response.text


def test_a_key_split_across_chunks_is_still_blanked(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(upstream_api_key=KEY)
    fake.queue(split_echo)
    response = client.post("/v1/embeddings", json={"model": "m", "input": "x"})
    assert_no_key(response)
    assert response.json() == {"echo": "[redacted]"}


@pytest.mark.parametrize("stream", [False, True])
def test_chat_blanks_the_key_in_success_answers_and_headers(make_client: Any, fake: FakeUpstream, stream: bool) -> None:
    client = make_client(upstream_api_key=KEY)

    def answer(request: httpx.Request) -> httpx.Response:
        token = request.headers["authorization"].removeprefix("Bearer ")
        headers = {"x-ratelimit-note": token}
        if stream:
            return sse_response(sse_body([chunk(f"your key is {token}")]), split_at=[40], headers=headers)
        body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": token}, "finish_reason": "stop"}]}
        return httpx.Response(200, json=body, headers=headers)

    fake.queue(answer)
    response = client.post("/v1/chat/completions", json=chat(stream=stream))
    assert response.status_code == 200
    assert_no_key(response)


def test_the_clients_own_key_is_blanked_too_when_forwarded(client: Any, fake: FakeUpstream) -> None:
    fake.queue(echo(401))
    response = client.get("/v1/models", headers={"authorization": f"Bearer {KEY}"})
    assert response.status_code == 401
    assert_no_key(response)

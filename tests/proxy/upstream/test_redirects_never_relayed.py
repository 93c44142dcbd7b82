"""An upstream's redirect never reaches the client, on a real socket: a client SDK would follow it and send the
prompt to another host, around the proxy. Nor is it followed (the operator's key would go with it): each is one
upstream call and a 502 upstream_redirect, with no `Location`. A 304, which answers a client's own conditional
request and points nowhere, is still relayed."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import structlog.testing

from contextlift.proxy import Settings, create_app
from tests.fakes import FakeEmbedder
from tests.serving import chat, raw_upstream

ELSEWHERE = "http://attacker.example/v1/chat/completions"


def redirecting(status: str) -> Any:
    async def answer(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(f"HTTP/1.1 {status}\r\nlocation: {ELSEWHERE}\r\ncontent-length: 0\r\n\r\n".encode())

    return answer


async def through_proxy(url: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    app = create_app(Settings(upstream_url=url, max_retries=2, retry_backoff=0.0), embedder=FakeEmbedder())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
        async with asyncio.timeout(20):
            response = await client.request(method, path, **kwargs)
    await app.state["proxy"].upstream.aclose()
    return response


@pytest.mark.parametrize("status", ["307 Temporary Redirect", "308 Permanent Redirect", "302 Found", "301 Moved"])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_chat_redirect_is_a_502_never_relayed_nor_followed(status: str, stream: bool) -> None:
    async with raw_upstream(redirecting(status)) as (url, heads):
        response = await through_proxy(url, "POST", "/v1/chat/completions", json=chat(stream=stream))
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_redirect"
    assert "location" not in response.headers
    assert ELSEWHERE not in response.text
    assert len(heads) == 1


async def test_a_relayed_call_redirect_is_a_502_too() -> None:
    async with raw_upstream(redirecting("302 Found")) as (url, heads):
        response = await through_proxy(url, "GET", "/v1/models")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_redirect"
    assert "location" not in response.headers
    assert len(heads) == 1


async def test_not_modified_is_relayed_as_it_is() -> None:
    async def not_modified(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(b'HTTP/1.1 304 Not Modified\r\netag: "v1"\r\n\r\n')

    async with raw_upstream(not_modified) as (url, _):
        response = await through_proxy(url, "GET", "/v1/files/file-1", headers={"if-none-match": '"v1"'})
    assert response.status_code == 304


async def test_a_redirect_is_logged_without_its_query_fragment_or_user_info() -> None:
    location = "https://user:pw-secret@sso.example/callback?token=tok-secret#access_token=frag-secret"

    async def redirect_with_token(writer: asyncio.StreamWriter, n: int) -> None:
        writer.write(f"HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\n\r\n".encode())

    with structlog.testing.capture_logs() as logs:
        async with raw_upstream(redirect_with_token) as (url, _):
            response = await through_proxy(url, "POST", "/v1/chat/completions", json=chat())
    assert response.status_code == 502
    (entry,) = [e for e in logs if e["event"] == "upstream redirect refused"]
    assert entry["location"] == "https://sso.example/callback"
    assert "secret" not in repr(logs)

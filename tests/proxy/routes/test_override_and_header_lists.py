"""The upstream is chosen by settings only, on every route: each override header and body field is refused
with 400 and no upstream call; headers that would tell a server another host or path, and cookies, never
reach the upstream; no cookie jar carries one client's cookies into another's requests."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from contextlift.proxy.edge.intake import UPSTREAM_OVERRIDE_FIELDS, UPSTREAM_OVERRIDE_HEADERS
from contextlift.proxy.upstream.headers import NEVER_FORWARDED
from tests.fakes import FakeUpstream, completion
from tests.serving import chat

ROUTES = [
    ("GET", "/v1/models", None),
    ("POST", "/v1/embeddings", {"model": "e", "input": "hi"}),
    ("POST", "/v1/chat/completions", chat()),
    ("DELETE", "/v1/files/file-1", None),
]


@pytest.mark.parametrize("header", UPSTREAM_OVERRIDE_HEADERS)
@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[r[1] + ":" + r[0] for r in ROUTES])
def test_every_override_header_is_refused_on_every_route(
    client: Any, fake: FakeUpstream, header: str, method: str, path: str, body: Any
) -> None:
    response = client.request(method, path, json=body, headers={header: "http://evil.test/v1"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == header
    assert fake.requests == []


@pytest.mark.parametrize("field", UPSTREAM_OVERRIDE_FIELDS)
@pytest.mark.parametrize("path", ["/v1/embeddings", "/v1/completions", "/v1/chat/completions"])
def test_every_override_field_is_refused_in_json_bodies(client: Any, fake: FakeUpstream, field: str, path: str) -> None:
    response = client.post(path, json={**chat(), field: "http://evil.test/v1"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == field
    assert fake.requests == []


def test_an_override_field_spelled_with_an_escape_is_still_refused(client: Any, fake: FakeUpstream) -> None:
    body = b'{"model": "e", "input": "x", "api\\u005fbase": "http://evil.test/v1"}'
    response = client.post("/v1/embeddings", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert fake.requests == []


HOST_AND_PATH_HEADERS = {
    "x-forwarded-host": "evil.test",
    "forwarded": "host=evil.test",
    "x-original-url": "/admin",
    "x-forwarded-prefix": "/admin",
    "x-rewrite-url": "/admin",
    "cookie": "session=client-a",
}


@pytest.mark.parametrize(("method", "path", "body"), ROUTES[:3], ids=[r[1] for r in ROUTES[:3]])
def test_host_path_and_cookie_headers_never_reach_the_upstream(
    client: Any, fake: FakeUpstream, method: str, path: str, body: Any
) -> None:
    fake.queue(httpx.Response(200, json=completion()))
    response = client.request(method, path, json=body, headers=HOST_AND_PATH_HEADERS)
    assert response.status_code == 200
    (request,) = fake.requests
    for name in HOST_AND_PATH_HEADERS:
        assert name in NEVER_FORWARDED
        assert name not in request.headers


@pytest.mark.parametrize("path", ["/v1/models", "/v1/chat/completions"])
def test_an_upstream_cookie_is_neither_kept_nor_relayed(client: Any, fake: FakeUpstream, path: str) -> None:
    set_cookie = {"set-cookie": "affinity=client-a; Path=/"}
    fake.queue(httpx.Response(200, json=completion(), headers=set_cookie), httpx.Response(200, json=completion()))
    body = chat() if path.endswith("completions") else None
    method = "POST" if body else "GET"
    first = client.request(method, path, json=body)
    client.cookies.clear()
    second = client.request(method, path, json=body)
    assert "set-cookie" not in first.headers
    assert second.status_code == 200
    assert "cookie" not in fake.requests[1].headers

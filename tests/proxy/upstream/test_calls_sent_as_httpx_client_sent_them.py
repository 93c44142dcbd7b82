"""The upstream client sends its calls to the transport directly, not through `httpx.AsyncClient`: each call still
goes out exactly as the client built and sent it (its default headers in their order, each replaced by the
client's own header of that name, the base URL's query and the client's, a base URL's user info as Basic auth,
the timeouts), and no cookie an upstream sets ever rides along with a later call."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextlift.proxy.upstream.bodies import ACCEPT_ENCODING
from contextlift.proxy.upstream.client import UpstreamClient

CASES = [
    (
        "http://upstream.test/v1",
        "POST",
        "chat/completions",
        {"authorization": "Bearer k", "x-note": "caf\xe9"},
        None,
        b"{}",
    ),
    (
        "http://upstream.test/v1",
        "POST",
        "chat/completions",
        {"User-Agent": "OpenAI/Python", "accept": "*/*"},
        None,
        b"{}",
    ),
    ("http://upstream.test/v1?api-version=2024-06", "POST", "chat/completions", {}, "b=%2F&a=1", b"{}"),
    ("http://upstream.test/v1/", "GET", "models/some%20model", {"connection": "close"}, "", None),
    ("http://user:secret@upstream.test/v1", "GET", "models", {"authorization": "Bearer k"}, None, None),
    # Where httpx frames a body, or an empty one, with headers of its own (Content-Length, before or after).
    ("http://upstream.test:8443/v1", "POST", "files", {"x-a": "1"}, None, b""),
    ("http://upstream.test/v1", "POST", "files", {}, None, None),
    ("http://upstream.test/v1", "PATCH", "fine_tuning/jobs/j", {}, "a=1", None),
    ("http://upstream.test/v1", "DELETE", "files/f", {}, None, b"x" * 70_000),
    ("http://upstream.test/v1", "GET", "models", {"Content-Length": "2", "Host": "other.test"}, None, b"{}"),
    ("http://upstream.test/v1", "POST", "responses", {"transfer-encoding": "chunked"}, None, None),
]


def as_httpx_client_sent_it(
    base: str, method: str, path: str, headers: dict[str, str], query: str | None, content: bytes | None
) -> Any:
    """The request `UpstreamClient` made through `httpx.AsyncClient` before it sent to its transport directly."""
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(30.0, connect=5.0, pool=10.0), headers={"accept-encoding": ACCEPT_ENCODING}
    )
    url = httpx.URL(base)
    params = url.params.merge(httpx.QueryParams(query)) if query else url.params
    raw = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
    target = f"{str(url.copy_with(query=None, fragment=None)).rstrip('/')}/{path}"
    request = client.build_request(method, target, headers=raw, content=content, params=params)
    if url.username or url.password:  # what the client's send added: the URL's user info as Basic auth
        next(httpx.BasicAuth(url.username, url.password).sync_auth_flow(request))
    return request


@pytest.mark.parametrize(("base", "method", "path", "headers", "query", "content"), CASES)
def test_a_call_goes_out_as_httpx_client_built_it(
    base: str, method: str, path: str, headers: dict[str, str], query: str | None, content: bytes | None
) -> None:
    client = UpstreamClient(base, api_key=None, timeout=30.0, connect_timeout=5.0, max_connections=4)
    sent = client.build_request(method, path, headers=headers, content=content, params=query)
    expected = as_httpx_client_sent_it(base, method, path, headers, query, content)
    assert str(sent.url) == str(expected.url)
    assert sent.headers.raw == expected.headers.raw
    assert sent.extensions["timeout"] == expected.extensions["timeout"]
    assert sent.read() == expected.read()


async def test_a_cookie_the_upstream_sets_never_rides_along() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"set-cookie": "session=one-clients; Path=/"}, json={"data": []})

    client = UpstreamClient(
        "http://upstream.test/v1", api_key=None, timeout=5.0, connect_timeout=5.0, max_connections=4,
        transport=httpx.MockTransport(answer),
    )  # fmt: skip
    for _ in range(2):
        await client.reserve()
        response = await client.send(client.build_request("GET", "models", headers={}))
        await response.aclose()
        client.release()
    assert "cookie" not in seen[1].headers
    await client.aclose()


_NAMES = st.sampled_from(["Host", "content-length", "Transfer-Encoding", "accept", "User-Agent", "x-a", "Connection"])


@given(
    method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]),
    headers=st.dictionaries(_NAMES, st.text(alphabet="abc 0123456789", min_size=1, max_size=5), max_size=4),
    content=st.none() | st.binary(max_size=8),
    query=st.none() | st.sampled_from(["", "a=1", "b=%2F&a=1"]),
)
def test_any_call_goes_out_as_httpx_client_built_it(
    method: str, headers: dict[str, str], content: bytes | None, query: str | None
) -> None:
    base = "http://upstream.test:9000/v1?api-version=1"
    client = UpstreamClient(base, api_key=None, timeout=30.0, connect_timeout=5.0, max_connections=4)
    sent = client.build_request(method, "files", headers=headers, content=content, params=query)
    expected = as_httpx_client_sent_it(base, method, "files", headers, query, content)
    assert (str(sent.url), sent.headers.raw, sent.read()) == (str(expected.url), expected.headers.raw, expected.read())

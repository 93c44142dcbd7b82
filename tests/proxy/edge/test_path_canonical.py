"""One canonical path per request, before routing: traversal, encoded separators, double encoding, control
characters and path parameters get a 400 envelope and no upstream call; plain paths are forwarded as they
were decoded, and the chat route cannot be reached under another spelling."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from contextlift.proxy import Settings, create_app
from contextlift.proxy.edge.paths import canonical_path, encoded_path
from contextlift.proxy.errors import InvalidPath
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.proxy.edge.raw_asgi import call
from tests.serving import UPSTREAM

ATTACKS = [
    b"/v1/../admin",
    b"/v1/%2e%2e/admin",
    b"/v1/%2E%2E/admin",
    b"/v1/..%2fadmin",
    b"/v1/models/../../admin",
    b"/v1/models%3Fx=1",
    b"/v1/chat/completions%3Fx=1",
    b"/v1/models%23frag",
    b"/v1/models%0d%0aX-Injected:%201",
    b"/v1/models%00",
    b"/v1/%252e%252e/admin",
    b"/v1/..%252fadmin",
    b"/v1/..\\admin",
    b"/v1/..%5cadmin",
    b"/v1/..;/admin",
    b"/v1/models;jsessionid=1",
    b"/v1//models",
    b"/v1/./models",
    b"/v1/models/%zz",
    b"/v1/models/%ff",
]


@pytest.fixture
def app(fake: FakeUpstream) -> Any:
    return create_app(
        Settings(upstream_url=UPSTREAM, retry_backoff=0.0), transport=fake.transport(), embedder=FakeEmbedder()
    )


@pytest.mark.parametrize("raw_path", ATTACKS, ids=[p.decode("latin-1") for p in ATTACKS])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_an_unplain_path_is_refused_before_any_route_or_upstream_call(
    app: Any, fake: FakeUpstream, raw_path: bytes, method: str
) -> None:
    response = await call(app, method, raw_path, headers=[(b"content-type", b"application/json")], body=b"{}")
    assert response.status == 400
    assert response.json()["error"]["code"] == "invalid_path"
    assert fake.requests == []


async def test_a_plain_path_is_forwarded_exactly_as_decoded(app: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json={"id": "my model"}))
    response = await call(app, "GET", b"/v1/models/my%20model")
    assert response.status == 200
    (request,) = fake.requests
    assert request.url.raw_path == b"/v1/models/my%20model"


def test_the_canonical_path_is_decoded_once_and_written_out_the_same() -> None:
    assert canonical_path(b"/v1/models/my%20model") == "/v1/models/my model"
    assert encoded_path("/v1/models/my model") == "/v1/models/my%20model"
    assert canonical_path(b"/v1/models/") == "/v1/models/"
    assert canonical_path(b"/v1/files/file-abc:1@x") == "/v1/files/file-abc:1@x"
    with pytest.raises(InvalidPath):
        canonical_path(b"v1/models")

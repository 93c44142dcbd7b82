"""The chat route goes through litestar's router like every other: a guard, a route middleware or a hook a later
change adds at the app's level applies to it too (it once had a way of its own that skipped them)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

from contextlift.proxy import Settings, create_app
from contextlift.proxy.app import ProxyApp
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.serving import UPSTREAM, chat


def refuse_everyone(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    raise NotAuthorizedException("no one passes")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/chat/completions", chat()),
        ("POST", "/v1/embeddings", {"model": "m", "input": "x"}),
        ("GET", "/v1/models", None),
    ],
)
async def test_an_app_level_guard_applies_to_every_route(
    monkeypatch: pytest.MonkeyPatch, fake: FakeUpstream, method: str, path: str, body: Any
) -> None:
    built = ProxyApp.__init__

    def with_a_guard(self: ProxyApp, **options: Any) -> None:
        built(self, guards=[refuse_everyone], **options)

    monkeypatch.setattr(ProxyApp, "__init__", with_a_guard)
    app = create_app(Settings(upstream_url=UPSTREAM), transport=fake.transport(), embedder=FakeEmbedder())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://proxy.test") as client:
        response = await client.request(method, path, json=body)
    assert response.status_code == 401
    assert fake.requests == []

"""`/v1/models` and every other `/v1` path go to the upstream unchanged."""

from __future__ import annotations

from typing import Any

import httpx

from tests.fakes import FakeUpstream

MODELS = {"object": "list", "data": [{"id": "fake-model", "object": "model", "owned_by": "fake"}]}


def test_models_returns_the_upstream_list(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=MODELS))
    response = client.get("/v1/models")
    assert response.status_code == 200
    assert response.json() == MODELS
    assert fake.requests[0].url == httpx.URL("http://upstream.test/v1/models")


def test_embeddings_pass_through_with_body_query_and_status(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(201, json={"object": "list", "data": []}, headers={"x-custom": "kept"}))
    body = b'{"model": "e", "input": "hello"}'
    response = client.post("/v1/embeddings?api-version=2", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 201
    assert response.headers["x-custom"] == "kept"
    (request,) = fake.requests
    assert request.url == httpx.URL("http://upstream.test/v1/embeddings?api-version=2")
    assert request.content == body


def test_pass_through_upstream_errors_keep_their_status(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(404, json={"error": {"message": "no such model"}}))
    response = client.delete("/v1/models/ghost")
    assert response.status_code == 404
    assert response.json() == {"error": {"message": "no such model"}}


def test_pass_through_unreachable_upstream_is_502(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.ConnectError("refused by fake"))
    response = client.get("/v1/models")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unreachable"


def test_health_and_readiness(client: Any, fake: FakeUpstream) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/startupz").json() == {"status": "started"}
    fake.queue(httpx.Response(200, json=MODELS))
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    fake.queue(httpx.ConnectError("down"))
    not_ready = client.get("/readyz")
    assert not_ready.status_code == 503
    assert "unreachable" in not_ready.json()["reasons"][0]

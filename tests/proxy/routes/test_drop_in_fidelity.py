"""What the client and the upstream send arrives as they sent it: the chat query string, the client's
`X-Request-Id`, the upstream's `x-request-id` and other response headers, the upstream's answer byte for byte
where no executor rebuilt it, image-sized bodies, and an Azure-shaped upstream whose base URL carries a query and
whose key goes in `api-key`."""

from __future__ import annotations

import base64
from typing import Any

import httpx

from tests.fakes import FakeUpstream, completion
from tests.serving import chat


def test_the_chat_query_string_reaches_the_upstream(client: Any, fake: FakeUpstream) -> None:
    client.post("/v1/chat/completions?api-version=2024-10-21", json=chat())
    assert fake.requests[0].url.params["api-version"] == "2024-10-21"


def test_the_clients_request_id_reaches_the_upstream(client: Any, fake: FakeUpstream) -> None:
    client.post("/v1/chat/completions", json=chat(), headers={"X-Request-Id": "trace-42"})
    assert fake.requests[0].headers["x-request-id"] == "trace-42"


def test_the_upstreams_request_id_and_headers_reach_the_client(client: Any, fake: FakeUpstream) -> None:
    headers = {"x-request-id": "req_upstream", "openai-organization": "org-1", "openai-project": "proj_1"}
    fake.queue(httpx.Response(200, json=completion(), headers=headers))
    response = client.post("/v1/chat/completions", json=chat())
    for name, value in headers.items():
        assert response.headers[name] == value
    assert len(response.headers["x-contextlift-request-id"]) == 32


# An answer as a server may write it: its own spacing and key order, escapes, a number json would rewrite.
UPSTREAM_BYTES = (
    b'{ "usage":{"total_tokens":3,"prompt_tokens":2,"completion_tokens":1},"object" : "chat.completion",'
    b'"choices":[{"index":0,"message":{"role":"assistant","content":"caf\\u00e9 \\ud83d\\ude00"},'
    b'"finish_reason":"stop"}],"created":1.0e9,"id":"chatcmpl-1","model":"fake-model"}'
)


DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is true" for i in range(1, 6))
WITH_DOCUMENTS = chat(f"{DOCS}\n\nQuestion: which fact?\nAnswer:")


def test_the_upstreams_answer_reaches_the_client_byte_for_byte(client: Any, fake: FakeUpstream) -> None:
    # reorder moves the documents it finds: it changes what is asked, not how the answer is written.
    for body, strategy in [(chat(), "none"), (WITH_DOCUMENTS, "reorder")]:
        fake.queue(httpx.Response(200, content=UPSTREAM_BYTES, headers={"content-type": "application/json"}))
        response = client.post("/v1/chat/completions", json=body, headers={"X-Context-Strategy": strategy})
        assert response.headers["x-context-strategy"] == strategy
        assert response.content == UPSTREAM_BYTES


def test_an_answer_an_executor_rebuilt_is_written_anew(client: Any, fake: FakeUpstream) -> None:
    for _ in range(2):
        fake.queue(httpx.Response(200, content=UPSTREAM_BYTES, headers={"content-type": "application/json"}))
    headers = {"X-Context-Strategy": "medoid; k=2; seed=1"}
    response = client.post("/v1/chat/completions", json=WITH_DOCUMENTS, headers=headers)
    assert response.headers["x-context-upstream-calls"] == "2"
    assert response.content != UPSTREAM_BYTES
    assert response.json()["usage"]["total_tokens"] == 6  # both calls' usage, summed


def test_the_proxys_own_id_is_the_request_id_only_when_the_upstream_sent_none(client: Any) -> None:
    response = client.post("/v1/chat/completions", json=chat())
    assert response.headers["x-request-id"] == response.headers["x-contextlift-request-id"]


def test_twenty_megabytes_of_images_reach_the_upstream(client: Any, fake: FakeUpstream) -> None:
    image = "data:image/png;base64," + base64.b64encode(b"\x89PNG" + b"\0" * (5 * 1024 * 1024)).decode()
    parts = [{"type": "text", "text": "What differs?"}, *[{"type": "image_url", "image_url": {"url": image}}] * 3]
    body = {"model": "fake-model", "messages": [{"role": "user", "content": parts}]}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert fake.bodies[0] == body


def test_an_azure_shaped_upstream_gets_its_query_and_api_key_header(fake: FakeUpstream) -> None:
    from litestar.testing import TestClient

    from contextlift.proxy import Settings, create_app
    from tests.fakes import FakeEmbedder

    settings = Settings(
        upstream_url="https://example.openai.azure.test/openai/deployments/gpt4o?api-version=2024-10-21",
        upstream_api_key="azure-operator-key-123456",
        upstream_api_key_header="api-key",
    )
    fake.queue(httpx.Response(200, json=completion()), httpx.Response(200, json={"data": []}))
    app = create_app(settings, transport=fake.transport(), embedder=FakeEmbedder())
    with TestClient(app) as client:
        client.post("/v1/chat/completions?extra=1", json=chat(), headers={"api-key": "client-key-xxxxxxxx"})
        client.get("/v1/models")
    chat_request, models_request = fake.requests[-2:]
    assert chat_request.url.path == "/openai/deployments/gpt4o/chat/completions"
    assert dict(chat_request.url.params) == {"api-version": "2024-10-21", "extra": "1"}
    assert chat_request.headers["api-key"] == "azure-operator-key-123456"
    assert "authorization" not in chat_request.headers
    assert models_request.url.params["api-version"] == "2024-10-21"

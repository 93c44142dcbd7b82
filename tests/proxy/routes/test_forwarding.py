"""What reaches the upstream: the client's body untouched but for the proxy's control fields; headers
filtered; the upstream key from settings or the client's Authorization."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream, completion
from tests.serving import chat


def test_unknown_fields_and_content_parts_are_forwarded_untouched(client: Any, fake: FakeUpstream) -> None:
    body = {
        "model": "fake-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {"url": "x"}}],
            },
        ],
        "temperature": 0.2,
        "logit_bias": {"50256": -100},
        "vendor_extension": {"nested": [1, 2, 3]},
    }
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert fake.bodies == [body]


def test_strategy_header_and_field_never_reach_the_upstream(client: Any, fake: FakeUpstream) -> None:
    client.post(
        "/v1/chat/completions",
        json=chat(context_strategy="none"),
        headers={"X-Context-Strategy": "none", "X-Context-Debug": "1"},
    )
    (request,) = fake.requests
    assert "context_strategy" not in fake.bodies[0]
    assert not any(name.lower().startswith("x-context-") for name in request.headers)


def test_hop_by_hop_and_connection_listed_headers_are_dropped(client: Any, fake: FakeUpstream) -> None:
    client.post(
        "/v1/chat/completions",
        json=chat(),
        headers={
            "Connection": "keep-alive, X-Secret-Hop",
            "X-Secret-Hop": "1",
            "TE": "trailers",
            "OpenAI-Project": "p1",
        },
    )
    headers = fake.requests[0].headers
    assert "x-secret-hop" not in headers
    assert "te" not in headers
    assert headers["openai-project"] == "p1"


def test_client_authorization_is_forwarded_without_a_configured_key(client: Any, fake: FakeUpstream) -> None:
    client.post("/v1/chat/completions", json=chat(), headers={"Authorization": "Bearer client-key"})
    assert fake.requests[0].headers["authorization"] == "Bearer client-key"


def test_configured_key_replaces_the_client_authorization(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(upstream_api_key="server-key")
    client.post("/v1/chat/completions", json=chat(), headers={"Authorization": "Bearer x"})
    assert fake.requests[0].headers["authorization"] == "Bearer server-key"


def test_upstream_url_comes_from_settings_only(client: Any, fake: FakeUpstream) -> None:
    client.post("/v1/chat/completions", json=chat(), headers={"Host": "evil.test", "X-Forwarded-Host": "evil.test"})
    assert fake.requests[0].url == httpx.URL("http://upstream.test/v1/chat/completions")


@pytest.mark.parametrize("field", ["base_url", "api_base", "upstream_url", "api_key"])
def test_a_body_field_setting_the_upstream_is_rejected(client: Any, fake: FakeUpstream, field: str) -> None:
    response = client.post("/v1/chat/completions", json=chat(**{field: "http://evil.test/v1"}))
    assert response.status_code == 400
    assert response.json()["error"]["param"] == field
    assert fake.requests == []


def test_a_header_setting_the_upstream_is_rejected(client: Any, fake: FakeUpstream) -> None:
    response = client.post("/v1/chat/completions", json=chat(), headers={"X-Upstream-Url": "http://evil.test/v1"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "x-upstream-url"
    assert fake.requests == []


def test_documents_field_is_rendered_in_the_lost_in_the_middle_format(client: Any, fake: FakeUpstream) -> None:
    body = chat(
        "Question: who wrote it?\nAnswer:",
        documents=[{"title": "Book", "text": "Ann wrote the book."}, "Bob read it."],
    )
    response = client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": "reorder"})
    assert response.headers["x-context-documents"] == "2"
    sent = fake.bodies[0]
    assert "documents" not in sent
    lines = sent["messages"][-1]["content"].split("\n")
    assert sorted(lines[:2]) == [
        "Document [1] Bob read it.",
        "Document [2](Title: Book) Ann wrote the book.",
    ] or sorted(lines[:2]) == ["Document [1](Title: Book) Ann wrote the book.", "Document [2] Bob read it."]
    assert lines[2:] == ["", "Question: who wrote it?", "Answer:"]


def test_with_no_strategy_the_body_goes_upstream_as_received_documents_field_included(
    client: Any, fake: FakeUpstream
) -> None:
    body = chat("Question: who wrote it?", documents=["Ann wrote the book.", "Bob read it."])
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert fake.bodies[0] == body


def test_response_body_is_the_upstreams(client: Any, fake: FakeUpstream) -> None:
    answer = completion("Lyon.", prompt_tokens=5, completion_tokens=1)
    answer["system_fingerprint"] = "fp_fake"
    fake.queue(httpx.Response(200, json=answer, headers={"openai-processing-ms": "12"}))
    response = client.post("/v1/chat/completions", json=chat())
    assert response.json() == answer
    assert response.headers["openai-processing-ms"] == "12"


@pytest.mark.parametrize("strategy", [None, "none", "reorder"])
def test_a_body_no_strategy_changes_goes_upstream_byte_identical(
    client: Any, fake: FakeUpstream, strategy: str | None
) -> None:
    raw = (
        b'{ "messages" : [ {"content": "caf\\u00e9 \xe2\x80\x94 no documents here", "role": "user"} ],\n'
        b'  "model": "fake-model", "temperature": 0.50, "seed": 1e2 }'
    )
    headers = {"content-type": "application/json", **({"x-context-strategy": strategy} if strategy else {})}
    response = client.post("/v1/chat/completions", content=raw, headers=headers)
    assert response.status_code == 200
    assert fake.requests[0].content == raw

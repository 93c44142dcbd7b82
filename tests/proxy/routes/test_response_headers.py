"""Every response says what the proxy did: strategy, documents, upstream calls, overhead, request id."""

from __future__ import annotations

from typing import Any

from tests.fakes import FakeUpstream
from tests.serving import chat

LITM_PROMPT = (
    "Write a high-quality answer for the given question using only the provided search results "
    "(some of which might be irrelevant).\n\n"
    "Document [1](Title: A) Alpha.\nDocument [2](Title: B) Beta.\nDocument [3](Title: C) Gamma.\n\n"
    "Question: which letter?\nAnswer:"
)


def test_success_carries_all_context_headers(client: Any) -> None:
    response = client.post("/v1/chat/completions", json=chat(LITM_PROMPT), headers={"x-context-strategy": "reorder"})
    assert response.headers["x-context-strategy"] == "reorder"
    assert response.headers["x-context-documents"] == "3"
    assert response.headers["x-context-upstream-calls"] == "1"
    assert float(response.headers["x-context-overhead-ms"]) >= 0
    assert len(response.headers["x-request-id"]) == 32


def test_client_request_id_is_echoed(client: Any) -> None:
    response = client.post("/v1/chat/completions", json=chat(), headers={"X-Request-Id": "trace-42"})
    assert response.headers["x-request-id"] == "trace-42"


def test_errors_carry_the_headers_too(client: Any, fake: FakeUpstream) -> None:
    response = client.post("/v1/chat/completions", json={"messages": []}, headers={"X-Request-Id": "bad-1"})
    assert response.status_code == 400
    assert response.headers["x-request-id"] == "bad-1"
    assert response.headers["x-context-upstream-calls"] == "0"
    assert response.headers["x-context-strategy"] == "none"


def test_per_model_default_strategy_applies_without_header(make_client: Any) -> None:
    client = make_client(default_strategies={"fake-model": "none"})
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "none"

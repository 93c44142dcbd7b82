"""What a client sends is bounded and checked before it costs anything: JSON text only (no NaN, no lone
surrogate), a body that dribbles gets 408 without holding an in-flight slot, and the bytes all requests
hold together stay under the memory budget."""

from __future__ import annotations

from typing import Any

import pytest

from contextlift.proxy import Settings, create_app
from tests.fakes import FakeEmbedder, FakeUpstream
from tests.proxy.edge.raw_asgi import call
from tests.serving import UPSTREAM, chat

JSON = [(b"content-type", b"application/json")]


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}',
        b'{"model": "\\udc00", "messages": [{"role": "user", "content": "hi"}]}',
        b'{"model": "m", "messages": [{"role": "user", "content": "\xed\xa0\x80"}]}',
        b'{"model": "m", "temperature": NaN, "messages": [{"role": "user", "content": "hi"}]}',
        b'{"model": "m", "top_p": -Infinity, "messages": [{"role": "user", "content": "hi"}]}',
    ],
    ids=["escaped-surrogate", "surrogate-model", "utf8-surrogate", "nan", "infinity"],
)
def test_a_body_that_is_not_json_text_is_a_400(client: Any, fake: FakeUpstream, body: bytes) -> None:
    response = client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"
    assert fake.requests == []


def test_a_valid_surrogate_pair_is_accepted(client: Any, fake: FakeUpstream) -> None:
    body = b'{"model": "m", "messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}'
    response = client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert fake.bodies[0]["messages"][0]["content"] == "\U0001f600"


def app_with(fake: FakeUpstream, **settings: Any) -> Any:
    return create_app(
        Settings(upstream_url=UPSTREAM, retry_backoff=0.0, **settings), transport=fake.transport(),
        embedder=FakeEmbedder(),
    )  # fmt: skip


async def test_a_dribbled_body_gets_408_and_never_holds_an_in_flight_slot(fake: FakeUpstream) -> None:
    import asyncio

    app = app_with(fake, body_read_timeout=0.3, max_in_flight=1)
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    dribble = [(0.0, body[:10]), *[(0.2, body[i : i + 1]) for i in range(10, 20)]]
    headers = [*JSON, (b"content-length", str(len(body)).encode())]
    slow = asyncio.ensure_future(call(app, "POST", b"/v1/chat/completions", headers=headers, pieces=dribble))
    await asyncio.sleep(0.1)
    legit = await call(app, "POST", b"/v1/chat/completions", headers=JSON, body=body)
    assert legit.status == 200
    refused = await slow
    assert refused.status == 408
    assert refused.json()["error"]["code"] == "request_timeout"


async def test_bodies_over_the_memory_budget_get_503(fake: FakeUpstream) -> None:
    app = app_with(fake, max_buffered_bytes=1024 * 1024, max_body_bytes=4 * 1024 * 1024)
    body = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * (2 * 1024 * 1024) + b'"}]}'
    response = await call(app, "POST", b"/v1/chat/completions", headers=JSON, body=body)
    assert response.status == 503
    assert response.json()["error"]["code"] == "memory_budget_exhausted"
    assert response.headers["retry-after"] == "1"
    small = await call(app, "POST", b"/v1/chat/completions", headers=JSON, body=b'{"model": "m", "messages": '
                       b'[{"role": "user", "content": "hi"}]}')  # fmt: skip
    assert small.status == 200


def test_more_documents_than_allowed_get_413_before_any_call(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_documents=100)
    body = {**chat("Question: q?"), "documents": ["x"] * 1_000_000}
    response = client.post("/v1/chat/completions", json=body, headers={"x-context-strategy": "reorder"})
    assert response.status_code == 413
    assert response.json()["error"]["param"] == "documents"
    assert fake.requests == []


def test_more_document_bytes_than_allowed_get_413(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_document_bytes=4096)
    docs = "\n".join(f"Document [{i}](Title: T{i}) " + "y" * 1000 for i in range(1, 9))
    response = client.post("/v1/chat/completions", json=chat(f"{docs}\n\nQuestion: q?"),
                           headers={"x-context-strategy": "reorder"})  # fmt: skip
    assert response.status_code == 413
    assert fake.requests == []

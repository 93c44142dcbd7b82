"""Strategies through the HTTP edge: exact call counts in headers, medoid streamed with keep-alives and
proper chunks, OpenTelemetry spans per step and per upstream call, cancellation when the client leaves."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextlift.proxy import Settings, create_app
from tests.fakes import FakeEmbedder, FakeUpstream, completion
from tests.serving import UPSTREAM

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is true" for i in range(1, 6))
BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": f"{DOCS}\n\nQuestion: which fact?\nAnswer:"}],
}


def test_medoid_headers_count_every_call_and_sum_usage(client: Any, fake: FakeUpstream) -> None:
    response = client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "medoid; k=3; seed=1"})
    assert response.status_code == 200
    assert response.headers["x-context-upstream-calls"] == "3"
    assert response.headers["x-context-documents"] == "5"
    assert response.headers["x-context-strategy"] == "medoid; k=3; seed=1; agreement=3/3"
    assert response.json()["usage"]["total_tokens"] == 36
    assert len(fake.requests) == 3


def test_pipeline_of_transforms_and_executor(client: Any, fake: FakeUpstream) -> None:
    fake.queue(httpx.Response(200, json=completion("Document [1]: fact number 1 is true")))
    response = client.post(
        "/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder, query-aware, recite"}
    )
    assert response.status_code == 200
    assert response.headers["x-context-strategy"] == "reorder, query-aware, recite; evidence=1"
    assert response.headers["x-context-upstream-calls"] == "2"
    final = fake.bodies[1]["messages"][-1]["content"]
    assert final == (
        "Question: which fact?\n\nDocument [1](Title: T1) fact number 1 is true\n\nQuestion: which fact?\nAnswer:"
    )


def test_streamed_medoid_sends_keepalives_then_chunks_usage_and_done(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(stream_keepalive=0.05)

    async def slow(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.2)
        return httpx.Response(200, json=completion("fact number 3 is true"))

    fake.queue(slow, slow, slow)
    body = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
    response = client.post("/v1/chat/completions", json=body, headers={"X-Context-Strategy": "medoid; k=3"})
    assert response.headers["x-context-upstream-calls"] == "3"
    frames = [f for f in response.text.split("\n\n") if f]
    assert frames[0] == ": keep-alive"
    data = [json.loads(f.removeprefix("data: ")) for f in frames if f.startswith("data: {")]
    assert data[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert data[1]["choices"][0]["delta"] == {"content": "fact number 3 is true"}
    assert data[2]["choices"][0]["finish_reason"] == "stop"
    assert data[3]["usage"]["total_tokens"] == 36
    assert frames[-1] == "data: [DONE]"
    assert all(f.startswith(("data: ", ": keep-alive")) for f in frames)


def test_streamed_medoid_whose_calls_all_fail_ends_with_an_error_event(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_retries=0)
    fake.queue(httpx.ConnectError("down"), httpx.ConnectError("down"))
    body = {**BODY, "stream": True}
    response = client.post("/v1/chat/completions", json=body, headers={"X-Context-Strategy": "medoid; k=2"})
    frames = [f for f in response.text.split("\n\n") if f.startswith("data: ")]
    assert json.loads(frames[0].removeprefix("data: "))["error"]["code"] == "upstream_unreachable"
    assert frames[-1] == "data: [DONE]"


def test_spans_per_step_and_per_upstream_call_without_content(client: Any, span_exporter: InMemorySpanExporter) -> None:
    client.post("/v1/chat/completions", json=BODY, headers={"X-Context-Strategy": "reorder, medoid; k=2"})
    spans = span_exporter.get_finished_spans()
    names = [s.name for s in spans]
    assert names.count("chat fake-model") == 2
    assert "strategy reorder" in names
    assert "strategy medoid" in names
    call = next(s for s in spans if s.name == "chat fake-model")
    assert call.kind == trace.SpanKind.CLIENT
    assert call.attributes is not None
    assert call.attributes["gen_ai.operation.name"] == "chat"
    assert call.attributes["gen_ai.request.model"] == "fake-model"
    assert call.attributes["gen_ai.usage.input_tokens"] == 10
    assert call.attributes["gen_ai.usage.output_tokens"] == 2
    medoid = next(s for s in spans if s.name == "strategy medoid")
    assert call.parent is not None
    assert call.parent.span_id == medoid.context.span_id
    recorded = json.dumps([dict(s.attributes or {}) for s in spans])
    assert "fact number" not in recorded


async def test_client_disconnect_cancels_upstream_calls() -> None:
    fake = FakeUpstream()
    cancelled = 0
    started = asyncio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        nonlocal cancelled
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled += 1
            raise
        raise AssertionError("not reached")

    fake.queue(hang, hang, hang)
    app = create_app(Settings(upstream_url=UPSTREAM), transport=fake.transport(), embedder=FakeEmbedder())
    payload = json.dumps(BODY).encode()
    messages: list[dict[str, Any]] = [{"type": "http.request", "body": payload, "more_body": False}]
    disconnect = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop(0)
        await disconnect.wait()
        return {"type": "http.disconnect"}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"", "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"x-context-strategy", b"medoid; k=3"),
                    (b"content-length", str(len(payload)).encode())],
        "client": ("127.0.0.1", 1), "server": ("testserver", 80), "state": {},
    }  # fmt: skip
    async with asyncio.timeout(5):
        handling = asyncio.ensure_future(app(scope, receive, send))
        await started.wait()
        await asyncio.sleep(0.05)
        disconnect.set()
        await handling
    assert cancelled == 3

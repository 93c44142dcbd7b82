"""A request through the proxy is one trace: a server span, the strategy steps and upstream calls beneath
it, the client's traceparent continued, and the trace id in the request's log line."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextlift.proxy import Settings
from contextlift.proxy.observability.logs import configure_logging
from contextlift.proxy.observability.telemetry import configure_tracing

DOCS = "\n".join(f"Document [{i}](Title: T{i}) fact number {i} is true" for i in range(1, 4))
BODY: dict[str, Any] = {
    "model": "fake-model",
    "messages": [{"role": "user", "content": f"{DOCS}\n\nQuestion: which fact?\nAnswer:"}],
}
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_server_span_parents_strategy_and_upstream_spans(client: Any, span_exporter: InMemorySpanExporter) -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream=stream)
    try:
        client.post(
            "/v1/chat/completions",
            json=BODY,
            headers={"X-Context-Strategy": "reorder, medoid; k=2", "traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01"},
        )
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers.clear()
    spans = {s.name: s for s in span_exporter.get_finished_spans()}
    server = spans["POST /v1/chat/completions"]
    assert server.kind.name == "SERVER"
    assert format(server.context.trace_id, "032x") == TRACE_ID
    assert server.attributes is not None
    assert server.attributes["http.response.status_code"] == 200
    assert spans["strategy reorder"].parent is not None
    assert spans["strategy reorder"].parent.span_id == server.context.span_id
    calls = [s for s in span_exporter.get_finished_spans() if s.name == "chat fake-model"]
    assert len(calls) == 2
    assert all(format(s.context.trace_id, "032x") == TRACE_ID for s in calls)
    summary = next(json.loads(line) for line in stream.getvalue().splitlines() if '"event": "request"' in line)
    assert summary["trace_id"] == TRACE_ID


def test_no_exporter_without_an_endpoint() -> None:
    assert configure_tracing(None, "contextlift") is False


def test_standard_otel_variables_configure_the_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "contextlift-staging")
    settings = Settings(upstream_url="http://up/v1")
    assert settings.otel_endpoint == "http://collector:4318"
    assert settings.otel_service_name == "contextlift-staging"

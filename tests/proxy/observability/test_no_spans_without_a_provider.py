"""Without a tracer provider every span would be a no-op carrying its parent's ids: the proxy makes none, and a
client's `traceparent` is still continued, so the request's log line carries the client's trace id."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
import structlog

from contextlift.proxy.observability import telemetry
from contextlift.proxy.observability.logs import configure_logging
from contextlift.proxy.upstream import request as upstream_request
from tests.serving import chat

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


class _Refused:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a span was made without a tracer provider ({name})")


@pytest.fixture
def no_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "tracing", lambda: False)
    monkeypatch.setattr(upstream_request, "tracing", lambda: False)


def test_a_request_makes_no_span(no_provider: None, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(telemetry, "_tracer", _Refused())
    monkeypatch.setattr(upstream_request, "_tracer", _Refused())
    response = client.post("/v1/chat/completions", json=chat())
    assert response.status_code == 200
    with client.stream("POST", "/v1/chat/completions", json=chat(stream=True)) as streamed:
        assert b"[DONE]" in b"".join(streamed.iter_bytes())


def test_the_clients_trace_id_still_reaches_the_log_line(no_provider: None, client: Any) -> None:
    stream = io.StringIO()
    configure_logging("json", "info", stream=stream)
    try:
        traceparent = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
        response = client.post("/v1/chat/completions", json=chat(), headers={"traceparent": traceparent})
    finally:
        structlog.reset_defaults()
        logging.getLogger().handlers.clear()
    assert response.status_code == 200
    summary = next(json.loads(line) for line in stream.getvalue().splitlines() if '"event": "request"' in line)
    assert summary["trace_id"] == TRACE_ID

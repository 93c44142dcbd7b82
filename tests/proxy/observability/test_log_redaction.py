"""The summary line per request, and no key in any log line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import structlog

from contextlift.proxy.observability.logs import configure_logging, redact
from tests.fakes import FakeUpstream
from tests.serving import chat

CANARY = "sk-canary-0123456789abcdef"


@pytest.fixture
def json_logs() -> Iterator[Any]:
    stream = io.StringIO()
    configure_logging("json", "debug", stream=stream)

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]

    yield lines
    structlog.reset_defaults()
    logging.getLogger().handlers.clear()


def test_one_summary_line_per_request(client: Any, json_logs: Any) -> None:
    client.post("/v1/chat/completions", json=chat(), headers={"X-Request-Id": "req-7"})
    summaries = [line for line in json_logs() if line.get("event") == "request"]
    assert len(summaries) == 1
    summary = summaries[0]
    assert summary["request_id"] == "req-7"
    assert summary["status"] == 200
    assert summary["model"] == "fake-model"
    assert summary["strategy"] == "none"
    assert summary["upstream_calls"] == 1
    assert summary["documents"] == 0
    assert summary["latency_ms"] >= 0


def test_authorization_never_appears_in_logs(client: Any, fake: FakeUpstream, json_logs: Any) -> None:
    fake.queue(httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {CANARY}"}}))
    client.post("/v1/chat/completions", json=chat(), headers={"Authorization": f"Bearer {CANARY}"})
    fake.queue(httpx.ConnectError(f"refused with key {CANARY}"))
    client.post("/v1/chat/completions", json=chat(), headers={"Authorization": f"Bearer {CANARY}"})
    lines = json_logs()
    assert lines
    assert all(CANARY not in json.dumps(line) for line in lines)


def test_redact_blanks_bearer_tokens_and_keys() -> None:
    assert CANARY not in redact(f"Authorization: Bearer {CANARY}")
    assert CANARY not in redact(f"key={CANARY}")
    assert redact("no secrets here") == "no secrets here"

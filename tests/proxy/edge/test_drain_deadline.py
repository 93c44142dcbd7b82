"""At the end of the shutdown grace, every request still open gets an answer: a stream that is stalled (or
still waiting for a strategy) ends with an error event and `[DONE]`, a request still waiting for the
upstream gets a 503 envelope with Retry-After; nothing is cut without a word."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from tests.fakes import FakeUpstream, chunk, never_answers, stalls_after_one_event
from tests.serving import chat

DOCS = "\n".join(f"Document [{i}](Title: Place {i}) Place {i} exports item {i}." for i in range(1, 5))
GRACE = 0.8


def frames(text: str) -> list[str]:
    return [f.removeprefix("data: ") for f in text.split("\n\n") if f]


def shutting_down_then(answer: Any, client: Any) -> Any:
    """A fake upstream that starts the proxy's shutdown (on its event loop, as the signal handler does)
    when the request reaches it, then answers with `answer`."""

    async def handler(request: httpx.Request) -> httpx.Response:
        client.app.state["proxy"].begin_shutdown(GRACE)
        return await answer(request) if asyncio.iscoroutinefunction(answer) else answer(request)

    return handler


def test_a_stalled_stream_ends_with_an_error_event_at_the_drain_deadline(client: Any, fake: FakeUpstream) -> None:
    fake.queue(shutting_down_then(stalls_after_one_event, client))
    started = time.monotonic()
    response = client.post("/v1/chat/completions", json=chat(stream=True))
    assert time.monotonic() - started < GRACE + 2
    lines = frames(response.text)
    assert json.loads(lines[0]) == json.loads(chunk("one"))
    assert json.loads(lines[1])["error"]["code"] == "shutting_down"
    assert lines[2:] == ["[DONE]"]


def test_a_streamed_medoid_still_waiting_ends_with_an_error_event(client: Any, fake: FakeUpstream) -> None:
    fake.queue(*[shutting_down_then(never_answers, client)] * 3)
    started = time.monotonic()
    response = client.post(
        "/v1/chat/completions",
        json=chat(f"{DOCS}\n\nQuestion: what does place 3 export?", stream=True),
        headers={"x-context-strategy": "medoid; k=3"},
    )
    assert time.monotonic() - started < GRACE + 2
    lines = frames(response.text)
    assert json.loads(lines[-2])["error"]["code"] == "shutting_down"
    assert lines[-1] == "[DONE]"


@pytest.mark.parametrize("strategy", ["none", "reorder"])
def test_a_request_still_waiting_gets_503_with_retry_after(client: Any, fake: FakeUpstream, strategy: str) -> None:
    fake.queue(shutting_down_then(never_answers, client))
    started = time.monotonic()
    response = client.post(
        "/v1/chat/completions", json=chat(f"{DOCS}\n\nQuestion: q?"), headers={"x-context-strategy": strategy}
    )
    assert time.monotonic() - started < GRACE + 2
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "shutting_down"
    assert response.headers["retry-after"] == "1"

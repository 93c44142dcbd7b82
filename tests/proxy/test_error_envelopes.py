"""Everything the proxy rejects itself: the right status, the OpenAI envelope, and no upstream call."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fakes import FakeUpstream
from tests.serving import chat


def assert_envelope(response: Any, status: int, code: str, param: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code
    assert error["param"] == param
    assert "Traceback" not in response.text


def test_malformed_json_is_400(client: Any, fake: FakeUpstream) -> None:
    response = client.post(
        "/v1/chat/completions", content=b'{"messages": [', headers={"content-type": "application/json"}
    )
    assert_envelope(response, 400, "invalid_json")
    assert fake.requests == []


def test_json_that_is_not_an_object_is_400(client: Any, fake: FakeUpstream) -> None:
    response = client.post("/v1/chat/completions", json=[1, 2])
    assert_envelope(response, 400, "invalid_json")
    assert fake.requests == []


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": "hi"}, "messages"),
        ({"model": "m", "messages": ["hi"]}, "messages[0]"),
        ({"model": "m", "messages": [{"content": "hi"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"role": "user"}]}, "messages[0].content"),
        ({"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"model": "m", "messages": [{"role": "user", "content": [{"text": "x"}]}]}, "messages[0].content[0]"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
            "messages[0].content[0].text",
        ),
    ],
)
def test_malformed_messages_are_400(client: Any, fake: FakeUpstream, body: dict[str, Any], param: str) -> None:
    assert_envelope(client.post("/v1/chat/completions", json=body), 400, "invalid_messages", param)
    assert fake.requests == []


def test_stream_of_wrong_type_is_400(client: Any, fake: FakeUpstream) -> None:
    assert_envelope(client.post("/v1/chat/completions", json=chat(stream="yes")), 400, "invalid_request", "stream")
    assert fake.requests == []


def test_non_json_content_type_is_415(client: Any, fake: FakeUpstream) -> None:
    response = client.post("/v1/chat/completions", content=b"messages=hi", headers={"content-type": "text/plain"})
    assert_envelope(response, 415, "unsupported_media_type", "Content-Type")
    assert fake.requests == []


def test_body_over_limit_is_413_by_declared_length(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_body_bytes=2048)
    body = chat("x" * 4096)
    assert_envelope(client.post("/v1/chat/completions", json=body), 413, "payload_too_large")
    assert fake.requests == []


def test_body_over_limit_is_413_when_streamed_without_length(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(max_body_bytes=2048)
    sent: list[int] = []

    def body() -> Any:
        for _ in range(100):
            sent.append(1024)
            yield b" " * 1024

    response = client.post("/v1/chat/completions", content=body(), headers={"content-type": "application/json"})
    assert_envelope(response, 413, "payload_too_large")
    assert fake.requests == []


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        ("bogus", "unknown strategy 'bogus'"),
        ("none; k=3", "has no parameter 'k'"),
        ("none, none", "cannot be combined"),
        ("REORDER!", "not a strategy name"),
        ("none;", "expected key=value"),
        ("", "empty strategy selection"),
    ],
)
def test_bad_strategy_header_is_400_naming_the_header(
    client: Any, fake: FakeUpstream, header: str, fragment: str
) -> None:
    response = client.post("/v1/chat/completions", json=chat(), headers={"X-Context-Strategy": header})
    assert_envelope(response, 400, "invalid_strategy", "X-Context-Strategy")
    assert fragment in response.json()["error"]["message"]
    assert response.headers["x-context-upstream-calls"] == "0"
    assert fake.requests == []


@pytest.mark.parametrize(
    ("header", "fragment"),
    [
        ("REORDER", "step 1: 'REORDER' is not a strategy name (names are lower case: 'reorder'); known strategies: "),
        ("reorderr", "unknown strategy 'reorderr'; known strategies: "),
        ("re order", "step 1: 're order' is not a strategy name; known strategies: "),
    ],
)
def test_a_misspelt_strategy_gets_the_names_there_are_whichever_way_it_is_wrong(
    client: Any, fake: FakeUpstream, header: str, fragment: str
) -> None:
    response = client.post("/v1/chat/completions", json=chat(), headers={"X-Context-Strategy": header})
    assert_envelope(response, 400, "invalid_strategy", "X-Context-Strategy")
    message = response.json()["error"]["message"]
    assert message.startswith(fragment)
    assert "none" in message.removeprefix(fragment).split(", ")
    assert "reorder" in message.removeprefix(fragment).split(", ")
    assert response.headers["x-context-format"] == "none: invalid-strategy"  # a strategy was asked for


def test_bad_strategy_field_is_400_naming_the_field(client: Any, fake: FakeUpstream) -> None:
    response = client.post("/v1/chat/completions", json=chat(context_strategy="nope"))
    assert_envelope(response, 400, "invalid_strategy", "context_strategy")
    response = client.post("/v1/chat/completions", json=chat(context_strategy=["none"]))
    assert_envelope(response, 400, "invalid_strategy", "context_strategy")
    assert fake.requests == []


def test_a_documents_field_the_proxy_cannot_read_goes_upstream_as_sent(client: Any, fake: FakeUpstream) -> None:
    # The upstream may accept shapes the proxy does not know (it used to get a 400 without any upstream call).
    strategy = {"x-context-strategy": "reorder"}
    for documents in ("one long string", [{"title": "no text"}]):
        raw = json.dumps(chat(documents=documents)).encode()
        response = client.post(
            "/v1/chat/completions", content=raw, headers={**strategy, "content-type": "application/json"}
        )
        assert response.status_code == 200
        assert response.headers["x-context-format"] == "none: unrecognised-documents-field"
        assert fake.requests[-1].content == raw


def test_unknown_route_is_404_envelope(client: Any) -> None:
    assert_envelope(client.get("/nowhere"), 404, "not_found")


def test_wrong_method_is_405_envelope(client: Any) -> None:
    assert_envelope(client.get("/v1/chat/completions"), 405, "method_not_allowed")


def test_options_on_the_chat_route_is_still_litestars(client: Any) -> None:
    """A POST to the chat route skips litestar's router (`ProxyApp`); every other method is routed by it."""
    response = client.options("/v1/chat/completions")
    assert response.status_code == 204
    assert response.headers["allow"] == "OPTIONS, POST"


@pytest.mark.parametrize("where", ["handler", "middleware"])
def test_an_unexpected_error_on_the_chat_route_is_a_500_envelope_with_the_records_headers(
    client: Any, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Raised inside the route's middleware (answered around the handler, through the middleware's send) or by
    the middleware itself (answered around it), before anything was sent."""
    from contextlift.proxy.edge import admission
    from contextlift.proxy.routes import chat as chat_route

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("a bug")

    if where == "handler":
        monkeypatch.setattr(chat_route, "check_chat_body", broken)
    else:
        monkeypatch.setattr(admission.AdmissionMiddleware, "__call__", broken)
    response = client.post("/v1/chat/completions", json=chat("hi"))
    assert_envelope(response, 500, "internal_error")
    assert response.headers["x-contextlift-request-id"]
    assert response.headers["x-context-strategy"] == "none"
    assert fake.requests == []


def test_a_proxy_error_from_the_chat_route_keeps_its_status_and_headers(client: Any, fake: FakeUpstream) -> None:
    response = client.post(
        "/v1/chat/completions", json=chat("hi"), headers={"x-context-strategy": "reorder; ranker=nonsense"}
    )
    assert_envelope(response, 400, "invalid_strategy", "X-Context-Strategy")
    assert response.headers["x-context-format"] == "none: invalid-strategy"
    assert fake.requests == []

"""What detection found is told to the client (`X-Context-Format`), a request can name its shape (`format=`),
operators declare their own templates (settings `document_formats`), and `POST /contextlift/detect` explains a
body without sending anything upstream."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from contextlift.proxy import Settings
from tests.fakes import FakeUpstream
from tests.serving import UPSTREAM, chat

FENCED = (
    "Context information is below.\n---------------------\nParis is in France.\n---\nBerlin is in Germany.\n---\n"
    "Rome is in Italy.\n---------------------\nQuery: Where is Berlin?\nAnswer: "
)
"""Chunks joined by a `---` line; joined by blank lines alone they are declined (the `ambiguous-chunks` case of
test_why_nothing_was_found_is_named_and_the_body_goes_as_sent)."""
IN_HOUSE = "<kb>Paris is in France.\n%%\nBerlin is in Germany.\n%%\nRome is in Italy.</kb>\nWhere is Berlin?"
KB_FORMAT = {"name": "kb", "start": "<kb>", "end": "</kb>", "separator": "\n%%\n"}


def post(client: Any, body: dict[str, Any], strategy: str | None = "reorder") -> Any:
    headers = {"x-context-strategy": strategy} if strategy else {}
    return client.post("/v1/chat/completions", json=body, headers=headers)


def test_the_shape_found_is_named_in_a_response_header(client: Any, fake: FakeUpstream) -> None:
    response = post(client, chat(FENCED))
    assert response.status_code == 200
    assert response.headers["x-context-format"] == "separated; region=fence"
    assert response.headers["x-context-documents"] == "3"


@pytest.mark.parametrize(
    ("content", "strategy", "reason"),
    [
        ("Tell me a joke.", "reorder", "none: no-context-region"),
        ("Context:\nParis is in France.\n\nQuestion: Where is Paris?", "reorder", "none: single-document"),
        ('The API returned {"city": "Paris", "sky": "clear"}. Summarize.', "reorder", "none: no-question"),
        (FENCED.replace("\n---\n", "\n\n"), "reorder", "none: ambiguous-chunks"),
        (FENCED, None, "none: not-requested"),
        (FENCED, "none", "none: not-requested"),
    ],
)
def test_why_nothing_was_found_is_named_and_the_body_goes_as_sent(
    make_client: Any, fake: FakeUpstream, content: str, strategy: str | None, reason: str
) -> None:
    # No fallback: a declined move adds nothing (by default it would quote a passage: test_unproven_moves_fall_back).
    client = make_client(unproven_fallback="none")
    raw = json.dumps(chat(content)).encode()
    headers = {"content-type": "application/json", **({"x-context-strategy": strategy} if strategy else {})}
    response = client.post("/v1/chat/completions", content=raw, headers=headers)
    assert response.headers["x-context-format"] == reason
    assert fake.requests[-1].content == raw


def test_a_request_can_name_its_shape(client: Any, fake: FakeUpstream) -> None:
    # Named, a shape needs no more evidence than its own markers: one paragraph under `Context:` is a document.
    single = chat("Context:\nParis is in France.\n\nQuestion: Where is Paris?")
    response = post(client, single, "query-aware; format=paragraphs")
    assert response.headers["x-context-format"] == "paragraphs; region=label"
    assert response.headers["x-context-documents"] == "1"
    response = post(client, chat(FENCED), "reorder; format=numbered")
    assert response.headers["x-context-format"] == "none: no-context-region"
    assert response.headers["x-context-strategy"] == "none"  # what ran: reorder had no documents


def test_an_unknown_shape_is_a_400_before_any_upstream_call(client: Any, fake: FakeUpstream) -> None:
    response = post(client, chat(FENCED), "reorder; format=langchain")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_strategy"
    assert "unknown format 'langchain'" in error["message"]
    assert "paragraphs" in error["message"]
    assert fake.requests == []


def test_steps_naming_different_shapes_are_a_400(client: Any) -> None:
    response = post(client, chat(FENCED), "reorder; format=numbered, recite; format=paragraphs")
    assert response.status_code == 400
    assert "different formats" in response.json()["error"]["message"]


def test_a_declared_format_wins_over_guessing(make_client: Any, fake: FakeUpstream) -> None:
    client = make_client(document_formats=[KB_FORMAT])
    response = post(client, chat(IN_HOUSE))
    assert response.headers["x-context-format"] == "declared:kb"
    assert response.headers["x-context-documents"] == "3"
    sent = fake.bodies[-1]["messages"][-1]["content"]
    assert sorted(sent.split("</kb>")[0].removeprefix("<kb>").split("\n%%\n")) == [
        "Berlin is in Germany.",
        "Paris is in France.",
        "Rome is in Italy.",
    ]
    assert sent.endswith("</kb>\nWhere is Berlin?")


def test_a_declared_format_applies_only_to_its_models(make_client: Any) -> None:
    client = make_client(document_formats=[{**KB_FORMAT, "models": ["gpt-4o*"]}])
    response = post(client, chat(IN_HOUSE))
    assert response.headers["x-context-format"] == "none: no-context-region"
    response = post(client, {**chat(IN_HOUSE), "model": "gpt-4o-mini"})
    assert response.headers["x-context-format"] == "declared:kb"


def test_a_request_names_a_declared_format(make_client: Any) -> None:
    client = make_client(document_formats=[{**KB_FORMAT, "models": ["nobody"]}])
    response = post(client, chat(IN_HOUSE), "reorder; format=kb")
    assert response.headers["x-context-format"] == "declared:kb"


@pytest.mark.parametrize(
    "declared",
    [
        {"name": "kb", "separator": "x", "document_start": "Doc {n}:"},
        {"name": "kb"},
        {"name": "kb", "document_start": "{n}"},
        {"name": "kb", "document_start": "{n} and {n}"},
        {"name": "paragraphs", "separator": "x"},
        {"name": "Bad Name", "separator": "x"},
    ],
)
def test_a_declared_format_is_checked_at_start_up(declared: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Settings(upstream_url=UPSTREAM, document_formats=[declared])


def test_the_detect_endpoint_explains_a_body_and_calls_nothing(client: Any, fake: FakeUpstream) -> None:
    response = client.post("/contextlift/detect", json=chat(FENCED))
    assert response.status_code == 200
    found = response.json()
    assert found["format"] == "separated; region=fence"
    assert found["question"] == "Where is Berlin?"
    assert [d["text"] for d in found["documents"]] == [
        "Paris is in France.",
        "Berlin is in Germany.",
        "Rome is in Italy.",
    ]
    start, end = found["documents"][1]["span"]
    assert FENCED[start:end] == "Berlin is in Germany."
    assert fake.requests == []


def test_the_detect_endpoint_takes_a_shape_and_refuses_bad_input(client: Any) -> None:
    assert client.post("/contextlift/detect?format=numbered", json=chat(FENCED)).json()["documents_found"] == 0
    unknown = client.post("/contextlift/detect?format=nope", json=chat(FENCED))
    assert unknown.status_code == 400
    assert unknown.json()["error"]["code"] == "invalid_strategy"
    malformed = client.post("/contextlift/detect", content=b"{nope", headers={"content-type": "application/json"})
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == "invalid_json"
    no_messages = client.post("/contextlift/detect", json={"model": "m"})
    assert no_messages.status_code == 400
    assert no_messages.json()["error"]["param"] == "messages"


def test_the_detect_endpoint_is_admitted_like_the_api(make_client: Any) -> None:
    response = make_client(max_body_bytes=2048).post("/contextlift/detect", json=chat("x" * 4096))
    assert response.status_code == 413
    limited = make_client(max_documents=2)
    # Paragraphs past the limit are no evidence of documents; documents that markers name are too many.
    assert limited.post("/contextlift/detect", json=chat(FENCED)).json()["format"] == "none: over-limit"
    litm = "Document [1] a\nDocument [2] b\nDocument [3] c\n\nQuestion: q?"
    too_many = limited.post("/contextlift/detect", json=chat(litm))
    assert too_many.status_code == 413
    assert too_many.json()["error"]["code"] == "payload_too_large"

"""`contextlift detect` says why a request was declined, from what is in that request, and what would make it read:
every reason detection can give has a hint, and the hint names the request's own detail (the message, the count,
the limit, the label that broke)."""

from __future__ import annotations

from typing import Any

import pytest

from contextlift.strategies import DocumentLimits
from contextlift.strategies.detection.explain import HINTS, explain_detection
from contextlift.strategies.detection.find import _REASON_RANK


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages)}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def test_every_reason_has_a_hint() -> None:
    assert set(HINTS) == {f"none: {reason}" for reason in _REASON_RANK}


CASES = {
    "no-context-region": (body(user("What is the capital of France?")), "no tags, numbered labels"),
    "no-question": (
        body(user("Context:\nThe first chunk.\n\n---\n\nThe second chunk.")),
        "2 documents read as separated; region=label in message 0, and no question",
    ),
    "single-document": (
        body(user("Context:\nOnly one chunk here.\n\nQuestion: what is here?")),
        "in message 0 reads as one piece",
    ),
    "ambiguous": (
        body(user("<doc>a</doc>\n<doc>b</doc>\n\nSome text.\n\n<source>c</source>\n<source>d</source>\n\nWhich?")),
        "xml: a second run of elements",
    ),
    "non-text-parts": (
        body(
            user(
                [
                    {"type": "text", "text": "first"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                    {"type": "text", "text": "second"},
                    {"type": "text", "text": "Which one?"},
                ]
            )
        ),
        "message 0 has an image or other part between two text parts",
    ),
}


@pytest.mark.parametrize("reason", sorted(CASES))
def test_the_hint_names_what_in_the_request_gave_the_reason(reason: str) -> None:
    request, detail = CASES[reason]
    found = explain_detection(request)
    assert found["format"] == f"none: {reason}"
    assert detail in found["hint"]
    assert "{why}" not in found["hint"]


def test_a_text_past_the_scanned_limit_says_its_size_and_the_limit() -> None:
    limits = DocumentLimits(max_documents=100, max_document_bytes=10_000, max_scanned_chars=1_000)
    found = explain_detection(body(user("Context:\n" + "x " * 2_000 + "\n\nQuestion: what?")), limits=limits)
    assert found["format"] == "none: over-limit"
    assert "message 0 holds 4,026 characters, past max_scanned_chars (1,000)" in found["hint"]

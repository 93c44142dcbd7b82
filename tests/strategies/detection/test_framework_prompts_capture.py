"""The framework fixtures are really captured: every shape's framework sent one chat completions body, and that
body holds the documents given to the framework, in order, in the messages of the stated role, and the question in
the latest user turn."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.strategies.framework_prompts import (
    FRAMEWORKS,
    MODEL,
    SHAPE_NAMES,
    FrameworkPrompt,
    framework_prompts,
    framework_versions,
)

SHAPES = pytest.mark.parametrize("name", SHAPE_NAMES)


def prompt(name: str) -> FrameworkPrompt:
    (found,) = [p for p in framework_prompts() if p.name == name]
    return found


def text_of(message: dict[str, Any]) -> str:
    """A message's text: its string content, or its text parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def find(text: str, haystack: str, start: int) -> int:
    """Where `text` is in `haystack` from `start`, as written or JSON-escaped (a tool's JSON result, DSPy's typed
    list); -1 if it is not."""
    at = haystack.find(text, start)
    return at if at >= 0 else haystack.find(json.dumps(text, ensure_ascii=False)[1:-1], start)


def test_every_shape_was_built() -> None:
    assert [p.name for p in framework_prompts()] == list(SHAPE_NAMES)


@SHAPES
def test_the_body_is_a_chat_request(name: str) -> None:
    body = prompt(name).body
    assert body["model"] == MODEL
    assert body.get("stream", False) is False
    assert body["messages"]
    assert all(isinstance(m, dict) and m.get("role") for m in body["messages"])


@SHAPES
def test_the_documents_occur_in_order_in_messages_of_their_role(name: str) -> None:
    p = prompt(name)
    assert len(p.documents) == 5
    assert len(set(p.documents)) == 5
    assert p.relevant == 2
    holding = "\n".join(text_of(m) for m in p.body["messages"] if m["role"] == p.message_role)
    at = 0
    for document in p.documents:
        found = find(document, holding, at)
        assert found >= 0, f"{name}: {document[:60]!r} is not in the {p.message_role} messages after offset {at}"
        at = found + 1


@SHAPES
def test_the_question_is_in_the_latest_user_turn(name: str) -> None:
    p = prompt(name)
    (last_user, *_) = [m for m in reversed(p.body["messages"]) if m["role"] == "user"]
    assert p.question in text_of(last_user)


def test_the_versions_of_every_framework_are_known() -> None:
    versions = framework_versions()
    assert set(versions) == set(FRAMEWORKS)
    assert "not installed" not in versions.values()

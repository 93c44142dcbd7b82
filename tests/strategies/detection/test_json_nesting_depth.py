"""Deeply nested JSON in a prompt is no key-value document: it is never decoded to its full depth, so no depth
the client chooses can exhaust the interpreter's recursion limit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextlift.strategies import parse_request


def body(content: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


@pytest.mark.parametrize(
    "nested",
    [
        '{"a": ' * 2_000 + '"x"' + "}" * 2_000,
        '{"a": ' * 2_000,
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"k": "v", "deep": ' + '{"a": ' * 5_000 + "1" + "}" * 5_000 + "}",
    ],
    ids=["object-2000-deep", "unclosed-2000-deep", "array-100000-deep", "records-beside-a-deep-value"],
)
def test_deep_nesting_is_plain_text_not_a_recursion_error(nested: str) -> None:
    content = f"Look at this:\n{nested}\n\nKey: a"
    request = parse_request(body(content))
    assert request.documents == ()
    assert request.render() == body(content)


def test_deep_nesting_inside_content_parts_is_plain_text() -> None:
    parts = [{"type": "text", "text": '{"a": ' * 2_000 + "1" + "}" * 2_000}, {"type": "text", "text": "which?"}]
    assert parse_request(body(parts)).documents == ()


def test_records_after_a_shallow_nested_object_are_still_found() -> None:
    shallow = json.dumps({"config": {"a": {"b": {"c": [1, 2, 3]}}}})
    records = json.dumps({"k1": "v1", "k2": "v2", "k3": "v3"}, indent=1)
    content = f"Settings: {shallow}\n\nJSON data:\n{records}\n\nKey: k2"
    request = parse_request(body(content))
    assert [d.title for d in request.documents] == ["k1", "k2", "k3"]
    assert request.render() == body(content)

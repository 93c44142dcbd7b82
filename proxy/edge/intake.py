"""Reading and checking what a client sent, before anything goes upstream."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contextlift.proxy import json_text
from contextlift.proxy.errors import InvalidMessages, InvalidRequest, MalformedJSON, UnsupportedMediaType


def require_json(content_type: str | None) -> None:
    """Raises UnsupportedMediaType unless the content type is JSON."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise UnsupportedMediaType(
            f"Content-Type must be application/json, got {media_type or 'none'!r}", param="Content-Type"
        )


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """The body as a JSON object.

    Raises:
        MalformedJSON: not UTF-8 JSON text (RFC 8259: no `NaN`, no lone surrogates), or not an object.
    """
    try:
        value = json_text.loads(raw)
    except ValueError as error:
        raise MalformedJSON(f"request body is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise MalformedJSON("request body must be a JSON object")
    return value


def check_chat_body(body: Mapping[str, Any]) -> None:
    """The checks every chat-completions body must pass here; the rest is the upstream's to judge.

    Raises:
        InvalidMessages: `messages` missing, empty, or not a list of `{role, content}` objects.
        InvalidRequest: `stream` or `stream_options` of the wrong type.
    """
    messages = body.get("messages")
    if messages is None:
        raise InvalidMessages("'messages' is required", param="messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidMessages("'messages' must be a non-empty array", param="messages")
    for index, message in enumerate(messages):
        _check_message(message, f"messages[{index}]")
    if "stream" in body and not isinstance(body["stream"], bool | None):
        raise InvalidRequest("'stream' must be a boolean", param="stream")
    if body.get("stream_options") is not None and not isinstance(body["stream_options"], dict):
        raise InvalidRequest("'stream_options' must be an object", param="stream_options")


def _check_message(message: Any, where: str) -> None:
    if not isinstance(message, dict):
        raise InvalidMessages(f"'{where}' must be an object", param=where)
    if not isinstance(message.get("role"), str) or not message["role"]:
        raise InvalidMessages(f"'{where}.role' must be a non-empty string", param=f"{where}.role")
    content = message.get("content")
    if content is None:
        if message["role"] == "assistant":
            return
        raise InvalidMessages(f"'{where}.content' is required for role {message['role']!r}", param=f"{where}.content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise InvalidMessages(f"'{where}.content' must be a string or an array of parts", param=f"{where}.content")
    for index, part in enumerate(content):
        part_where = f"{where}.content[{index}]"
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise InvalidMessages(f"'{part_where}' must be an object with a 'type'", param=part_where)
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise InvalidMessages(f"'{part_where}.text' must be a string", param=f"{part_where}.text")


# The one list of names by which a request could pick the upstream or its key, refused on every route.
UPSTREAM_OVERRIDE_FIELDS = ("base_url", "api_base", "upstream_url", "api_key")
UPSTREAM_OVERRIDE_HEADERS = (
    "x-upstream-url",
    "x-base-url",
    "x-api-base",
    "x-context-upstream",
    "x-context-upstream-url",
)


def reject_upstream_overrides(headers: Mapping[str, str], body: Mapping[str, Any] | None) -> None:
    """The upstream and its key come from settings only: a request that tries to set them is refused.

    Raises:
        InvalidRequest: a body field or header names an upstream URL or key.
    """
    for name in UPSTREAM_OVERRIDE_HEADERS:
        if name in headers:
            raise InvalidRequest(f"header {name} is not accepted; the upstream is configured", param=name)
    for name in UPSTREAM_OVERRIDE_FIELDS:
        if body is not None and name in body:
            raise InvalidRequest(f"'{name}' cannot be set by a request; the upstream is configured", param=name)


def json_fields(raw: bytes, content_type: str | None) -> Mapping[str, Any] | None:
    """The top-level fields of a pass-through JSON body, when one could name an override; else None.

    Pass-through bodies can be large (embedding inputs) and are relayed as bytes, so they are parsed only
    when an override name, or an escape that could spell one, occurs in them.
    """
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        return None
    if b"\\u" not in raw and not any(f'"{name}"'.encode() in raw for name in UPSTREAM_OVERRIDE_FIELDS):
        return None
    try:
        # Lenient on purpose: whatever an upstream's parser would still read as a field must be seen here.
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None

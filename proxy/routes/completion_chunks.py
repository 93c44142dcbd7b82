"""A whole chat completion re-told as stream chunks, for clients that asked for a stream of a strategy that
must see every answer before choosing one (`medoid`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextlift.proxy.errors import UpstreamProtocolError


def completion_chunks(completion: Mapping[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The chunks an OpenAI stream of this completion would carry: role, content, finish, then usage if asked.

    Raises:
        UpstreamProtocolError: the completion's choices are not a list of objects with message objects.
    """
    base = {
        "id": completion.get("id", "chatcmpl-contextlift"),
        "object": "chat.completion.chunk",
        "created": completion.get("created", 0),
        "model": completion.get("model", ""),
    }
    if completion.get("system_fingerprint"):
        base["system_fingerprint"] = completion["system_fingerprint"]
    chunks: list[dict[str, Any]] = []
    choices = completion.get("choices") or []
    if not isinstance(choices, list):
        raise UpstreamProtocolError("upstream answered with 'choices' that is not a list")
    for choice in choices:
        message = choice.get("message") or {} if isinstance(choice, Mapping) else None
        if not isinstance(message, Mapping):
            raise UpstreamProtocolError("upstream answered with choices that are not objects with a message")
        index = choice.get("index", 0)
        delta: dict[str, Any] = {"role": message.get("role", "assistant"), "content": ""}
        chunks.append({**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
        content: dict[str, Any] = {k: v for k, v in message.items() if k != "role" and v is not None}
        if content:
            chunks.append({**base, "choices": [{"index": index, "delta": content, "finish_reason": None}]})
        finish = {"index": index, "delta": {}, "finish_reason": choice.get("finish_reason", "stop")}
        chunks.append({**base, "choices": [finish]})
    if include_usage and completion.get("usage"):
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks
